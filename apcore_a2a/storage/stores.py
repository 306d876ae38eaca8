"""The task store, push-config store and cluster event stream an agent runs on.

:func:`open_stores` is the one place the store chain is composed from the settings
(``docs/architecture.md``, *The save path*, draws it with the rows each part writes).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from a2a.server.cluster import StoredTask, TaskEventStream, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.tasks import (
    DatabaseTaskStore,
    InMemoryPushNotificationConfigStore,
    PushNotificationConfigStore,
    TaskStore,
)
from a2a.types import Task, TaskStatusUpdateEvent

from ._urls import (
    StoreURL,
    create_engine,
    parse_store_url,
)
from .contexts import ContextGuard, sql_others
from .event_log import MemoryEventLog
from .fields import StoredFields, hold_owners
from .memory import BoundedMemoryTaskStore
from .observed import SaveListener, store_view
from .turns import MemoryTurnClaims, TurnClaims

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from apcore_a2a.settings import Settings

    from ._sql_backend import SqlBackend
    from .quota_slots import SqlQuotaSlots

#: Tasks whose recent events the in-process event log keeps (which go: ``event_log.py``).
EVENT_LOG_TASKS = 1000


@dataclass
class Stores:
    """Everything the request handler needs to keep tasks, plus their lifecycle.

    Attributes:
        task_store: For ``DefaultRequestHandler(task_store=...)``; a
            ``VersionedTaskStore`` on SQL stores.
        push_config_store: Same backend (and database) as the task store, owner-scoped.
        event_stream: SQL stores (the ``task_events`` table), for
            ``DefaultRequestHandler(event_stream=...)``.
        engine: The SQLAlchemy engine of SQL stores (``None`` otherwise), for features
            that keep a table of their own next to the tasks.
        turns: Which follow-up continues a parked task (``turns.py``; in the database
            in cluster mode).
        event_log: Events kept for resumable subscriptions: the SQL event stream,
            or a :class:`~.event_log.MemoryEventLog` (``None``: off).
        quota_slots: Cluster mode: per-caller quota slots shared by all replicas.
        fields: What of a caller's message the store can hold (``fields.py``): check
            it before any task exists.
        contexts: Refuses a new task in a context holding another owner's task
            (``contexts.py``).
    """

    task_store: TaskStore | VersionedTaskStore
    push_config_store: PushNotificationConfigStore
    event_stream: TaskEventStream | None = None
    engine: AsyncEngine | None = None
    turns: TurnClaims = field(default_factory=MemoryTurnClaims)
    event_log: object | None = None
    quota_slots: SqlQuotaSlots | None = None
    fields: StoredFields = field(default_factory=StoredFields)
    contexts: ContextGuard = field(default_factory=lambda: ContextGuard(None, resolve_user_scope))
    _backend: SqlBackend | None = field(default=None, repr=False)
    _memory: BoundedMemoryTaskStore | None = field(default=None, repr=False)
    #: an application's own store: what its start does (``listing.py``)
    _own_start: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)

    def on_save(self, listener: SaveListener) -> Callable[[], None]:
        """Call *listener* (it must not block) after each successful save of a task, until
        the callable returned is called (it removes *listener*; calling it again does
        nothing)."""
        view: Any = self.task_store  # the chain's view (observed.py): it calls the listeners
        remove: Callable[[], None] = view.on_save(listener)
        return remove

    def on_unsaved(self, listener: SaveListener) -> Callable[[], None]:
        """Call *listener* (it must not block) after each save of a task that raised (a
        store outage, a value refused; a2a-sdk's run of the task ends there), until the
        callable returned is called."""
        view: Any = self.task_store
        remove: Callable[[], None] = view.on_unsaved(listener)
        return remove

    async def get_task(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task, whichever store kind is in use (unwraps cluster versions)."""
        found = await self.task_store.get(task_id, context)
        return found.task if isinstance(found, StoredTask) else found

    def watch_cancels(self, running: Callable[[], list[str]], stop: Callable[[str], None]) -> None:
        """Call *stop* with the id of each task whose save failed (a2a-sdk's run of it ended
        there) and, in cluster mode, with each task id of *running* (those executing here)
        that another replica has canceled (or failed, having found this one dead) in the
        shared store."""
        self.on_unsaved(lambda task, _context: stop(task.id))
        if self._backend is not None and self._backend.registry is not None:
            self._backend.cancel_watch = (running, stop)

    def on_forget(self, listener: Callable[[str, ServerCallContext], Awaitable[None]]) -> None:
        """The memory store (else a no-op): await *listener* with the id of each task it
        forgets (evicted or deleted) and a context of its owner, so that what is kept
        beside a task goes with it."""
        if self._memory is not None:
            self._memory.forgetting.append(listener)

    def purge_with(self, *tables: Any) -> None:
        """SQL stores (else a no-op): retention deletes the rows of *tables* (each keyed by
        a ``task_id`` column) with their task."""
        if self._backend is not None:
            self._backend.purged_with += tables

    def on_interrupted(
        self, listener: Callable[[Task, TaskStatusUpdateEvent], Awaitable[None]]
    ) -> None:
        """SQL stores (else a no-op): await *listener* with each task this process fails
        as interrupted (its replica died, or a restart), after the failure is stored."""
        if self._backend is not None:
            self._backend.interrupted.append(listener)

    def left_behind(self, tasks: str) -> str:
        """What becomes of *tasks* ("the task", "them") that a stop left running or whose
        final state it could not store, by the kind of task store (for its warnings)."""
        if self._backend is not None:
            if self._backend.registry is not None:
                return f"another replica, or the next start, marks {tasks} failed as interrupted"
            return f"the next start marks {tasks} failed as interrupted"
        if self._own_start is not None:
            return (
                "the application's own task store has no restart recovery: nothing marks "
                f"{tasks} failed"
            )
        return f"the memory task store ends with this process: nothing of {tasks} is kept"

    async def start(self) -> None:
        """Create missing tables, fail tasks a dead process left running, start loops;
        :class:`StoreUnavailableError` when the database cannot be reached or cannot take
        the connections this agent would open (PostgreSQL). An application's own store:
        the indexes of its table where the agent may create them (``listing.py``)."""
        if self._backend is not None:
            await self._backend.start()
        elif self._own_start is not None:
            await self._own_start()

    async def check_connections(self) -> None:
        """PostgreSQL: :class:`StoreUnavailableError` naming the limit (the server's, the
        role's or the database's) that cannot take the connections all workers will hold
        (:meth:`start` checks it too; ``--workers`` checks it once before forking)."""
        if self._backend is not None:
            await self._backend.check_connections()

    async def aclose(self) -> None:
        """Stop background loops and release connections. Safe to call twice."""
        if self._backend is not None:
            await self._backend.aclose()

    async def ping(self) -> None:
        """Cheap liveness probe; raises :class:`StoreUnavailableError` when unreachable."""
        if self._backend is not None:
            await self._backend.ping()


def open_stores(task_store: str | TaskStore, settings: Settings) -> Stores:
    """Build the stores for *task_store* without any I/O: a URL (the forms:
    ``docs/storage.md``, *URLs*) or a ``TaskStore`` object, used as is with an in-memory
    push-config store beside it. Raises ``ValueError`` for an unusable URL or setting
    combination.
    """
    url = parse_store_url(task_store) if isinstance(task_store, str) else None
    if settings.cluster and (url is None or url.kind == "memory"):
        raise ValueError(
            "cluster mode needs a shared SQL task store (sqlite:///path.db or "
            "postgresql://user@host/db); memory:// and TaskStore objects are private to "
            "one process"
        )
    if url is None or url.kind == "memory":
        store = task_store
        if not isinstance(store, TaskStore):
            store = BoundedMemoryTaskStore(
                max_capacity=settings.task_max_capacity, ttl_seconds=settings.task_ttl_seconds
            )
        stores = Stores(store_view(store), InMemoryPushNotificationConfigStore())
        paged = False
        if isinstance(store, BoundedMemoryTaskStore):
            stores.contexts = ContextGuard(store.others_in, store.owner_of)
            stores._memory = store
        elif isinstance(store, DatabaseTaskStore):  # a caller's own SQL store
            from apcore_a2a.upstream.unreadable_rows import read_rows_safely

            from .listing import pages_of

            read_rows_safely(store)  # an unreadable row costs its own task only
            hold_owners(store)  # its owner_resolver's keys as ours: ones its column holds
            pages = pages_of(store)
            paged = pages is not store
            stores.task_store = store_view(pages)
            stores.fields = StoredFields(store)
            stores.contexts = ContextGuard(sql_others(store), store.owner_resolver)
        else:  # a store that cannot tell: this process's open requests only
            owner_of = getattr(store, "owner_resolver", resolve_user_scope)
            stores.contexts = ContextGuard(None, owner_of)
        if store is task_store:  # the application's own
            from .listing import start_own_store

            retention = settings.task_retention_seconds or 0.0
            stores._own_start = functools.partial(
                start_own_store, store, paged=paged, retention_seconds=retention
            )
    else:
        stores = _sql_stores(url, settings)
    if stores.event_stream is not None:
        stores.event_log = stores.event_stream
    elif settings.task_event_log_size > 0:
        stores.event_log = MemoryEventLog(
            per_task=settings.task_event_log_size,
            max_tasks=EVENT_LOG_TASKS,
            per_task_bytes=settings.task_event_log_bytes,
            total_bytes=settings.task_event_log_total_bytes,
        )
    return stores


def _sql_stores(url: StoreURL, settings: Settings) -> Stores:
    """One chain for SQLite and PostgreSQL, single and cluster: the SDK's versioned store
    with streamed chunks in ``task_events`` only (``streamed.py``) under the deferred
    writes; cluster mode adds the replica registry, shared turns and quota slots."""
    from ._replicas import REPLICA_APPLICATION, ReplicaRegistry, new_replica_id

    if url.pgbouncer and not settings.cluster:
        raise ValueError(
            "?pgbouncer=true needs --cluster: a PgBouncer in transaction mode cannot hold "
            "the lock that keeps a second process off a database served without it"
        )
    replica_id = new_replica_id()
    if settings.cluster and url.kind == "postgresql":
        # A replica paused in the middle of a statement holds its transaction's locks
        # until it wakes, and no other replica could fail its tasks meanwhile: the others
        # end its sessions by their name (ReplicaRegistry.end_sessions).
        server = {"application_name": REPLICA_APPLICATION + replica_id}
        if not url.pgbouncer:
            # The server ends a paused replica's transaction once it has been idle for a
            # replica timeout, by when the others count that replica dead anyway.
            # (PgBouncer refuses this startup parameter: its own idle_transaction_timeout
            # does it, docs/storage.md.)
            idle = f"{round(settings.cluster_replica_timeout * 1000)}ms"
            server["idle_in_transaction_session_timeout"] = idle
        url = url.with_server_settings(**server)
    try:
        from apcore_a2a.upstream.unreadable_push_configs import ReadableConfigStore

        engine = create_engine(url)
    except ImportError as exc:
        extra = "postgres" if url.kind == "postgresql" else url.kind
        raise ValueError(
            f"{url.kind} task store needs extra packages ({exc.name or exc}); "
            f"install them with: pip install 'apcore-a2a[{extra}]'"
        ) from None
    from ._pg_writer import PgWriter
    from ._sql_backend import SqlBackend
    from ._wakeups import WakingTaskEventStream
    from .deferred import DeferredWrites
    from .migrations import create_indexes
    from .outages import GuardedPushStore, guarded
    from .quota_slots import SqlQuotaSlots
    from .retention import FinishedNotes
    from .running import LostSaves
    from .streamed import ChunkedTaskStore
    from .turns import SqlTurnClaims

    if settings.push_encryption_key:
        try:
            import cryptography  # noqa: F401
        except ImportError:
            raise ValueError(
                "push_encryption_key needs the 'cryptography' package: "
                "pip install 'apcore-a2a[encryption]'"
            ) from None
    push_store = ReadableConfigStore(engine, encryption_key=settings.push_encryption_key or None)
    pg_writer = PgWriter(url) if url.kind == "postgresql" else None
    held = [f"pool {url.pool_size}"] + ["writer"] * (pg_writer is not None)
    # One process alone wakes its own subscribers as it saves (``publish``); replicas
    # listen for each other's events.
    # (PgBouncer in transaction mode cannot carry LISTEN: its replicas poll.)
    wakeups = settings.cluster and settings.cluster_wakeups and not url.pgbouncer
    if wakeups and url.kind == "postgresql":
        held.append("listener")
    if url.kind == "postgresql" and not url.pgbouncer:  # this process's lock (_owner.py)
        held.append("lock")
    versioned = ChunkedTaskStore(engine)
    db = versioned.as_task_store
    assert isinstance(db, DatabaseTaskStore)
    events = WakingTaskEventStream(
        engine,
        url,
        poll_interval_s=settings.cluster_poll_interval,
        wakeups=wakeups,
        noted=versioned.seqs,
    )
    registry = turns = slots = None
    if settings.cluster:
        registry = ReplicaRegistry(
            engine,
            heartbeat_interval=settings.cluster_heartbeat_interval,
            replica_timeout=settings.cluster_replica_timeout,
            replica_id=replica_id,
        )
        turns = SqlTurnClaims(engine, registry)
        slots = SqlQuotaSlots(engine, registry)
    writes = DeferredWrites(versioned, registry, pg_writer=pg_writer)
    # Retention's notes of tasks saved finished (retention.py), in single mode too.
    notes = FinishedNotes(engine) if settings.task_retention_seconds else None
    parts = (writes, versioned, events, notes, turns, slots)
    sql = SqlBackend(
        url,
        engine,
        versioned,
        [
            versioned.initialize,
            events.initialize,
            push_store.initialize,
            functools.partial(create_indexes, db),  # of the agent's reads (migrations.py)
        ],
        [part.aclose for part in parts if part is not None],
        retention_seconds=settings.task_retention_seconds,
        poll_interval=settings.cluster_poll_interval,
        connections=(url.pool_size + len(held) - 1, settings.workers, " + ".join(held)),
        registry=registry,
    )
    if slots is not None:
        sql.interrupted.append(slots.task_ended)
    if notes is not None:
        sql.interrupted.append(notes.interrupted)
    others = sql_others(db)
    stores = Stores(
        store_view(
            writes,
            around=guarded,
            saved=turns.saved if turns else None,
            failed=turns.unsaved if turns else None,
        ),
        GuardedPushStore(push_store),
        events,
        engine,
        turns or MemoryTurnClaims(),
        quota_slots=slots,
        fields=StoredFields(db),
        contexts=ContextGuard(
            lambda context_id, owner: guarded(others(context_id, owner)), db.owner_resolver
        ),
        _backend=sql,
    )
    if notes is not None:
        stores.on_save(notes.saved)
    # A save whose answer was lost leaves its task as it saved it, with no run: failed
    # once the database answers (running.py).
    lost = LostSaves(stores.task_store, settings.cluster_poll_interval)
    stores.on_unsaved(lost.unsaved)
    sql.closers.insert(0, lost.aclose)
    return stores
