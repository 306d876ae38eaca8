"""Assemble SQL-backed stores (imported only when a SQL URL is used)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._urls import StoreURL

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

    from ._set import Stores

__all__ = ["open_sql_stores"]

_INSTALL_HINT = {
    "sqlite": "pip install 'apcore-a2a[sqlite]'",
    "postgresql": "pip install 'apcore-a2a[postgres]'",
}


def open_sql_stores(
    store_url: StoreURL,
    settings: Settings,
    *,
    heartbeat_interval: float,
    replica_timeout: float,
) -> Stores:
    """Engine + SDK SQL stores (+ cluster store and event stream), not yet connected."""
    try:
        from a2a.server.cluster import VersionedDatabaseTaskStore
        from a2a.server.tasks import DatabasePushNotificationConfigStore, DatabaseTaskStore

        from ._engine import create_engine, create_sqlite_writer_engine

        engine = create_engine(store_url)
        if store_url.sqlite_path is not None:
            _create_private(store_url.sqlite_path)
    except ImportError as exc:
        raise ValueError(
            f"{store_url.kind} task store needs extra packages ({exc.name or exc}); "
            f"install them with: {_INSTALL_HINT[store_url.kind]}"
        ) from None

    from ._batched import BatchedTaskWriter
    from ._event_stream import WakingTaskEventStream
    from ._pg_writer import PgWriter
    from ._replicas import ClaimingTaskStore, ReplicaRegistry, SqlTurnClaims
    from ._set import Stores
    from ._sql_backend import SqlBackend
    from .cluster_deferred import DeferredClusterWrites
    from .deferred import DeferredWrites
    from .quota_slots import SqlQuotaSlots

    if settings.push_encryption_key:
        try:
            import cryptography  # noqa: F401
        except ImportError:
            raise ValueError(
                "push_encryption_key needs the 'cryptography' package: "
                "pip install 'apcore-a2a[encryption]'"
            ) from None
    push_store = DatabasePushNotificationConfigStore(
        engine, encryption_key=settings.push_encryption_key or None
    )
    initializers: list[Callable[[], Awaitable[None]]] = [push_store.initialize]
    pg_writer = PgWriter(store_url) if store_url.kind == "postgresql" else None
    if settings.cluster:
        if settings.cluster_poll_interval <= 0:
            raise ValueError("cluster_poll_interval must be greater than 0")
        versioned = VersionedDatabaseTaskStore(engine)
        registry = ReplicaRegistry(
            engine, heartbeat_interval=heartbeat_interval, replica_timeout=replica_timeout
        )
        event_stream = WakingTaskEventStream(
            engine,
            store_url,
            poll_interval_s=settings.cluster_poll_interval,
            wakeups=settings.cluster_wakeups,
        )
        initializers = [versioned.initialize, event_stream.initialize, *initializers]
        deferred_cluster = DeferredClusterWrites(
            ClaimingTaskStore(versioned, registry), pg_writer=pg_writer
        )
        backend = SqlBackend(
            store_url=store_url,
            engine=engine,
            task_store=versioned,
            initializers=initializers,
            registry=registry,
            retention_seconds=settings.task_retention_seconds,
            poll_interval=settings.cluster_poll_interval,
            closers=[deferred_cluster.aclose, event_stream.aclose],
        )
        return Stores(
            task_store=deferred_cluster,
            push_config_store=push_store,
            event_stream=event_stream,
            engine=engine,
            turns=SqlTurnClaims(engine),
            quota_slots=SqlQuotaSlots(engine, registry),
            _backend=backend,
        )
    plain = DatabaseTaskStore(engine)
    writer = BatchedTaskWriter(
        plain, sync_engine=create_sqlite_writer_engine(store_url), pg_writer=pg_writer
    )
    deferred = DeferredWrites(plain, plain.owner_resolver, write=writer.save)
    backend = SqlBackend(
        store_url=store_url,
        engine=engine,
        task_store=plain,
        initializers=[plain.initialize, *initializers],
        registry=None,
        retention_seconds=settings.task_retention_seconds,
        closers=[deferred.aclose, writer.aclose],
    )
    return Stores(
        task_store=deferred, push_config_store=push_store, engine=engine, _backend=backend
    )


def _create_private(path: str) -> None:
    """Create a missing SQLite file readable by its owner only (mode 0600).

    SQLite gives the ``-wal`` and ``-shm`` files it creates the mode of the database file,
    so they are private too. An existing file keeps its mode (the operator's choice).
    """
    import contextlib
    import os

    with contextlib.suppress(FileExistsError, FileNotFoundError, IsADirectoryError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
