"""The live objects of one running server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import AgentCard

from apcore_a2a.adapters.agent_card import CardDocument
from apcore_a2a.execution.catalog import SkillCatalog
from apcore_a2a.execution.executor import ApCoreAgentExecutor
from apcore_a2a.ops.operations import Operations
from apcore_a2a.server.limits import StreamLimiter
from apcore_a2a.settings import Settings
from apcore_a2a.storage import Stores

__all__ = ["ServerState"]


@dataclass
class ServerState:
    """Live objects of one server, shared with ops endpoints and tests."""

    settings: Settings
    registry: Any
    executor: Any
    catalog: SkillCatalog
    handler: DefaultRequestHandler
    stores: Stores
    streams: StreamLimiter
    agent_executor: ApCoreAgentExecutor
    ops: Operations
    started_at: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def card(self) -> AgentCard:
        return self.catalog.snapshot.card

    def document(self) -> CardDocument:
        return self.catalog.snapshot.document
