"""The Explorer: a self-contained browser UI to discover and try the agent's skills.

Mount it with :func:`explorer_routes`; the page then talks to the agent like any other
A2A client (agent card + JSON-RPC 1.0), so it needs no server-side state of its own.
"""

from apcore_a2a.explorer._routes import SECURITY_HEADERS, explorer_routes

__all__ = ["SECURITY_HEADERS", "explorer_routes"]
