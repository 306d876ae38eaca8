"""Call any A2A agent (1.0 or 0.3) with plain dicts, over a2a-sdk's client transports.

``import apcore_a2a.client`` loads nothing of the server side (no uvicorn, apcore,
``a2a.server``), so a process that only calls agents stays light.
"""

from apcore_a2a.client import errors
from apcore_a2a.client.card import AgentCardFetcher
from apcore_a2a.client.client import A2AClient
from apcore_a2a.client.errors import *  # noqa: F403  (the typed errors, errors.__all__)

__all__ = ["A2AClient", "AgentCardFetcher"]
__all__ += errors.__all__
