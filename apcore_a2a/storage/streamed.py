"""Streamed chunks stay out of the task row while the task runs (every SQL store).

The SDK stores the whole task with each appended chunk, so a stream of *n* chunks
rewrites the artifact *n* times; its versioned store also puts every event in
``task_events``.
So :class:`ChunkedTaskStore` empties an appended artifact of a running task in the very
task object the SDK keeps in memory (its copies stay small too) and marks it
(:data:`IN_LOG`), and puts the parts back from the events on a read and on the save that
settles the task (``docs/storage.md``, *Long streams*). Whoever reads the SDK's in-memory
task meanwhile sees the artifact empty and marked (0.3 push bodies put the event's chunk
in its place: ``push/bodies.py``); so do replicas of older versions reading the row.
"""

from __future__ import annotations

from typing import cast

from a2a.server.cluster import StoredTask, TaskVersion, VersionedDatabaseTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.models import TaskEventModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
)
from a2a.types.a2a_pb2 import StreamResponse
from google.protobuf.json_format import ParseDict
from sqlalchemy import and_, select

#: artifact metadata key in a stored row: "the parts of this artifact are its events"
IN_LOG = "apcore_a2a.inEventLog"

_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})


class ChunkedTaskStore(VersionedDatabaseTaskStore):
    """``VersionedDatabaseTaskStore`` keeping appended chunks in the event log only."""

    @property
    def _sql(self) -> DatabaseTaskStore:
        return cast("DatabaseTaskStore", self.as_task_store)

    async def save(
        self,
        task: Task,
        *,
        event: Event | None = None,
        prev: Task | None = None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        """Store *task*: appended chunks of a running task go to ``task_events`` only."""
        if task.status.state in _RUNNING:
            if isinstance(event, TaskArtifactUpdateEvent) and event.append:
                _take_out(task, event)
        elif any(IN_LOG in a.metadata for a in task.artifacts):
            await self._put_back(task, self._sql.owner_resolver(context), None)
        return await super().save(
            task, event=event, prev=prev, prev_version=prev_version, context=context
        )

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task with its version, its streamed artifacts whole as of that version."""
        stored = await super().get(task_id, context)
        if stored is not None and any(IN_LOG in a.metadata for a in stored.task.artifacts):
            await self._put_back(stored.task, self._sql.owner_resolver(context), stored.version)
        return stored

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks (SDK semantics), streamed artifacts whole."""
        found = await super().list(params, context)
        owner = self._sql.owner_resolver(context)
        for task in found.tasks:
            if any(IN_LOG in a.metadata for a in task.artifacts):
                await self._put_back(task, owner, None)
        return found

    async def peek(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task's id, context and status only (no artifacts, no history), or ``None``:
        what a resuming subscription needs, without reading a long output."""
        db = self._sql
        model = db.task_model
        stmt = select(model.context_id, model.status, model.protocol_version).where(
            and_(model.id == task_id, model.owner == db.owner_resolver(context))
        )
        async with db.async_session_maker() as session:
            row = (await session.execute(stmt)).one_or_none()
        if row is None:
            return None
        if row[2] != "1.0":  # a row in an older format: the SDK's own conversion
            return await self.get(task_id, context)
        task = Task(id=task_id, context_id=row[0])
        ParseDict(row[1], task.status)
        return StoredTask(task, TaskVersion.MISSING)

    async def _put_back(self, task: Task, owner: str, upto: TaskVersion | None) -> None:
        """Rebuild *task*'s marked artifacts, in place, from its events (up to *upto*)."""
        marked = {a.artifact_id: a for a in task.artifacts if IN_LOG in a.metadata}
        parts: dict[str, list[Artifact]] = {key: [] for key in marked}
        events = TaskEventModel
        stmt = (
            select(events.task_version, events.event_data)
            .where(and_(events.task_id == task.id, events.owner == owner))
            .order_by(events.seq)
        )
        async with self._sql.async_session_maker() as session:
            rows = await session.stream(stmt.execution_options(yield_per=256))
            async for version, data in rows:
                if upto is not None and TaskVersion(version).is_after(upto):
                    break
                response = StreamResponse.FromString(data)
                kind = response.WhichOneof("payload")
                if kind == "task":  # a first Task event may bring artifacts of its own
                    for artifact in response.task.artifacts:
                        if artifact.artifact_id in parts:
                            parts[artifact.artifact_id] = [artifact]
                elif kind == "artifact_update":
                    update = response.artifact_update
                    chunks = parts.get(update.artifact.artifact_id)
                    if chunks is not None:
                        if not update.append:
                            chunks.clear()
                        chunks.append(update.artifact)
        for key, artifact in marked.items():
            del artifact.parts[:]
            artifact.parts.extend(part for chunk in parts[key] for part in chunk.parts)
            del artifact.metadata[IN_LOG]
            if not artifact.metadata.fields:
                artifact.ClearField("metadata")


def _take_out(task: Task, event: TaskArtifactUpdateEvent) -> None:
    """Empty the artifact *event* appended to (every part of it is an event) and mark it."""
    artifact_id = event.artifact.artifact_id
    for artifact in reversed(task.artifacts):
        if artifact.artifact_id == artifact_id:
            del artifact.parts[:]
            artifact.metadata[IN_LOG] = True
            return
