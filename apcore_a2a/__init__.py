"""apcore-a2a: serve an apcore module registry as an A2A (Agent2Agent) agent.

    from apcore_a2a import serve
    serve(registry)

Server names are imported lazily so that ``import apcore_a2a.client`` stays light
(httpx and the standard library only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apcore_a2a._lazy import lazy_names
from apcore_a2a._version import __version__

if TYPE_CHECKING:
    from apcore_a2a._runner import StartupError, async_serve, serve
    from apcore_a2a.adapters.outputs import AuthRequired, File, InputRequired, reply_as
    from apcore_a2a.approval import A2AApprovalHandler
    from apcore_a2a.client import (
        A2AClient,
        A2AClientError,
        A2AConnectionError,
        A2ADiscoveryError,
        AgentCardFetcher,
    )
    from apcore_a2a.errors import MissingExtraError
    from apcore_a2a.execution.executor import ApCoreAgentExecutor
    from apcore_a2a.server.factory import A2AServerFactory
    from apcore_a2a.settings import Settings
    from apcore_a2a.upstream.apcore_schema_cache import cache_schemas

__all__ = [
    "A2AApprovalHandler",
    "A2AClient",
    "A2AClientError",
    "A2AConnectionError",
    "A2ADiscoveryError",
    "A2AServerFactory",
    "AgentCardFetcher",
    "ApCoreAgentExecutor",
    "AuthRequired",
    "File",
    "InputRequired",
    "MissingExtraError",
    "Settings",
    "StartupError",
    "__version__",
    "async_serve",
    "cache_schemas",
    "reply_as",
    "serve",
]

_MODULES = {
    "apcore_a2a._runner": ("StartupError", "async_serve", "serve"),
    "apcore_a2a.adapters.outputs": ("AuthRequired", "File", "InputRequired", "reply_as"),
    "apcore_a2a.approval": ("A2AApprovalHandler",),
    "apcore_a2a.client": (
        "A2AClient",
        "A2AClientError",
        "A2AConnectionError",
        "A2ADiscoveryError",
        "AgentCardFetcher",
    ),
    "apcore_a2a.errors": ("MissingExtraError",),
    "apcore_a2a.execution.executor": ("ApCoreAgentExecutor",),
    "apcore_a2a.upstream.apcore_schema_cache": ("cache_schemas",),
    "apcore_a2a.server.factory": ("A2AServerFactory",),
    "apcore_a2a.settings": ("Settings",),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


__getattr__ = lazy_names(__name__, _LAZY, globals())
