"""What operations read from a running server, as a protocol.

The server's state object satisfies it structurally, so operations never import the server
wiring (which imports operations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.types import CancelTaskRequest, Task

    from apcore_a2a.execution.observer import ExecutionTracker

__all__ = ["ServerView"]


class _Streams(Protocol):
    @property
    def active(self) -> int: ...


class _Catalog(Protocol):
    def ids(self) -> list[str]: ...


class _Stores(Protocol):
    async def ping(self) -> None: ...

    async def get_task(self, task_id: str, context: ServerCallContext) -> Task | None: ...


class _Handler(Protocol):
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None: ...


class _Ops(Protocol):
    tracker: ExecutionTracker
    shutdown_deadline: float | None


class ServerView(Protocol):
    """The live parts of one server that health, metrics and shutdown read."""

    @property
    def started_at(self) -> float: ...

    @property
    def extras(self) -> dict[str, Any]: ...

    @property
    def streams(self) -> _Streams: ...

    @property
    def catalog(self) -> _Catalog: ...

    @property
    def stores(self) -> _Stores: ...

    @property
    def handler(self) -> _Handler: ...

    @property
    def ops(self) -> _Ops: ...
