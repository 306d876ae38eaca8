"""Task store URLs and their engines: which backend, which async driver, which options.

We pick the async driver SQLAlchemy needs and turn our own query parameters into driver
arguments. SQLite transactions start with ``BEGIN IMMEDIATE`` (the write lock up front):
otherwise two transactions that read and then write (the SDK's ``session.merge``) can
deadlock on the lock upgrade, which SQLite reports at once as "database is locked"
instead of waiting. PostgreSQL engines pre-ping, so connections broken by a database
restart are replaced transparently.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlalchemy import event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from .outages import UNAVAILABLE

logger = logging.getLogger(__name__)

StoreKind = Literal["memory", "sqlite", "postgresql"]

_EXAMPLES = "memory://, sqlite:///path/tasks.db or postgresql://user@host/db"
_HOST_FORM = (
    "write scheme://user:password@host:port/db and percent-encode '@', ':' and '/' "
    "in the password (%40, %3A, %2F)"
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_SSL_MODES = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}


class StoreUnavailableError(Exception):
    """The task store cannot be opened or reached (start-up, ``/health``); for operators,
    its message names the store, password masked. A request meeting an outage is answered
    :class:`apcore_a2a.errors.StoreUnavailableError` (-32092, no detail) instead."""


class StoreInUseError(StoreUnavailableError):
    """Another process serves the database in a way this one may not join (``_owner.py``);
    the message says what to do."""


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed task store URL; ``display`` masks the password (safe for logs)."""

    kind: StoreKind
    display: str
    url: URL | None = None
    connect_args: dict[str, Any] = field(default_factory=dict)
    #: PostgreSQL: connections the engine's pool opens at most (``?pool_size=``)
    pool_size: int = 20
    #: PostgreSQL through a PgBouncer in transaction mode (``?pgbouncer=true``): no
    #: session state (startup parameters, prepared statements, session locks, ``LISTEN``)
    pgbouncer: bool = False

    def with_server_settings(self, **settings: str) -> StoreURL:
        """This URL with PostgreSQL run-time *settings* on each connection it opens."""
        args = dict(self.connect_args)
        args["server_settings"] = {**args.get("server_settings", {}), **settings}
        return replace(self, connect_args=args)

    @property
    def sqlite_path(self) -> str | None:
        """The database file of a file-backed SQLite URL, else ``None``."""
        database = self.url.database if self.kind == "sqlite" and self.url else None
        return database if database and database != ":memory:" else None


def check_sqlite_folder(store_url: StoreURL) -> None:
    """Raise :class:`StoreUnavailableError` when a SQLite database's folder is missing:
    SQLite creates the file but not its folder, and says only "unable to open database
    file" (blocking: a file-system check)."""
    path = store_url.sqlite_path
    if path is None:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise StoreUnavailableError(
            f"task store {store_url.display}: directory {parent} does not exist"
        )


def parse_store_url(text: str) -> StoreURL:
    """Parse *text*; ``ValueError`` with a message that names the accepted forms.

    No message quotes *text*: a URL refused for its shape is one no masking rule can be
    sure to read (``memory:admin:PASSWORD@x``), and ``open_stores`` shows it to an app's
    log unmasked."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"task store URL is empty; expected {_EXAMPLES}")
    text = text.strip()
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme == "memory":
        if text.lower().rstrip("/") not in ("memory:", "memory:/"):
            raise ValueError("memory task store URL takes no path or options; write memory://")
        return StoreURL(kind="memory", display="memory://")
    if not scheme:
        raise ValueError(f"task store URL has no scheme; expected {_EXAMPLES}")
    try:
        url = make_url(text)
        port = url.port  # SQLAlchemy reads it as int() when parsing
    except ArgumentError:  # its message may quote the URL one day; ours never does
        raise ValueError(f"cannot parse task store URL; expected {_EXAMPLES}") from None
    except ValueError:  # its int() of the port; the message quotes it, never the password
        raise ValueError(f"task store URL: bad port or host; {_HOST_FORM}") from None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"task store URL: bad port {port} (1-65535); {_HOST_FORM}")
    if url.host and "@" in url.host:
        # an unencoded '@' in the password: the rest of it would be taken for the host
        raise ValueError(f"task store URL: '@' in the host part; {_HOST_FORM}")
    backend, _, driver = url.drivername.partition("+")
    if backend == "sqlite":
        return _sqlite(url, driver)
    if backend in ("postgresql", "postgres"):
        return _postgres(url, driver)
    raise ValueError(f"unsupported task store URL scheme {url.drivername!r}; expected {_EXAMPLES}")


def _sqlite(url: URL, driver: str) -> StoreURL:
    if driver not in ("", "aiosqlite"):
        raise ValueError(
            f"SQLite driver {driver!r} is not supported; write sqlite:///path.db and "
            "the async driver (aiosqlite) is chosen for you"
        )
    if url.query:
        raise ValueError(f"SQLite task store URLs take no options, got {sorted(url.query)}")
    if url.host or url.username or url.port:
        raise ValueError(
            "SQLite task store URL has a host part; use sqlite:///relative.db or "
            "sqlite:////absolute/path.db"
        )
    if not url.database:
        # Most often a variable left empty (sqlite:///$DB): SQLAlchemy would open a
        # throwaway in-memory database, and the tasks would be lost at the next start.
        raise ValueError(
            "SQLite task store URL names no file; use sqlite:///path/tasks.db "
            "(sqlite:///:memory: for a throwaway database)"
        )
    url = url.set(drivername="sqlite+aiosqlite")
    return StoreURL(kind="sqlite", display=url.render_as_string(hide_password=True), url=url)


def _postgres(url: URL, driver: str) -> StoreURL:
    if driver not in ("", "asyncpg"):
        raise ValueError(
            f"PostgreSQL driver {driver!r} is not supported; write postgresql://... and "
            "the async driver (asyncpg) is chosen for you"
        )
    if not url.database:
        raise ValueError("PostgreSQL task store URL names no database: postgresql://host/DBNAME")
    query = dict(url.query)
    connect_args: dict[str, Any] = {"timeout": 5.0}
    pgbouncer = query.pop("pgbouncer", "false")
    if pgbouncer not in ("true", "false"):
        raise ValueError(f"pgbouncer must be true or false, got {pgbouncer!r}")
    if pgbouncer == "true":
        # Each transaction may run on another server connection: a statement prepared
        # on one is unknown on the next, or collides with another client's of that name.
        connect_args["statement_cache_size"] = 0
    schema = query.pop("schema", None)
    if schema is not None:
        if not isinstance(schema, str) or not _IDENTIFIER.match(schema):
            raise ValueError(f"schema must be a plain SQL identifier, got {schema!r}")
        if pgbouncer == "true":
            raise ValueError(
                "schema cannot be set through PgBouncer, which refuses search_path as a "
                "startup parameter: set the role's instead (ALTER ROLE name IN DATABASE db "
                "SET search_path = schema) and drop ?schema="
            )
        connect_args["server_settings"] = {"search_path": schema}
    sslmode = query.pop("sslmode", None)
    if sslmode is not None:
        if sslmode not in _SSL_MODES:
            raise ValueError(f"sslmode must be one of {sorted(_SSL_MODES)}, got {sslmode!r}")
        connect_args["ssl"] = sslmode
    pool = query.pop("pool_size", "20")
    if not isinstance(pool, str) or not pool.isdigit() or not 1 <= int(pool) <= 1000:
        raise ValueError(f"pool_size must be a whole number from 1 to 1000, got {pool!r}")
    if query:
        raise ValueError(
            f"unsupported PostgreSQL task store options {sorted(query)}; supported: schema, "
            "sslmode, pool_size, pgbouncer"
        )
    return StoreURL(
        kind="postgresql",
        display=url.set(drivername="postgresql").render_as_string(hide_password=True),
        url=url.set(drivername="postgresql+asyncpg", query={}),
        connect_args=connect_args,
        pool_size=int(pool),
        pgbouncer=pgbouncer == "true",
    )


SQLITE_BUSY_TIMEOUT_MS = 15_000
#: Execution option for connections that only read (SQLite then takes no write lock).
READ_ONLY = "apcore_a2a_read_only"


async def read(engine: AsyncEngine, stmt: Any) -> list[Any]:
    """The rows of *stmt*, on a read-only connection (no SQLite write lock)."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{READ_ONLY: True})
        return list((await conn.execute(stmt)).all())


def index_name(table: str, what: str) -> str:
    """``ix_apcore_a2a_<table>_<what>``: index names are one namespace per schema
    (PostgreSQL) or database (SQLite), so each task table there needs its own. A name
    past the 63 bytes PostgreSQL keeps names the table by a digest instead."""
    name = f"ix_apcore_a2a_{table}_{what}"
    if len(name.encode()) <= 63:
        return name
    return f"ix_apcore_a2a_{hashlib.sha256(table.encode()).hexdigest()[:12]}_{what}"


def index_sql(dialect: Any, name: str, table: str, columns: str, where: str = "") -> str:
    """The statement that creates the index *name* on *table* (*columns*, SQL; of the rows
    *where* holds, if given) unless it exists."""
    quote = dialect.identifier_preparer.quote
    sql = f"CREATE INDEX IF NOT EXISTS {quote(name)} ON {quote(table)} ({columns})"
    return f"{sql} WHERE {where}" if where else sql


async def create_index(
    engine: AsyncEngine, name: str, table: str, columns: str, where: str = ""
) -> None:
    """Create the index *name* on *table* (*columns*, SQL; of the rows *where* holds, if
    given) unless it exists; one of that name that is not the one the reads need
    (:func:`index_covers`) is logged, once a start, and left alone: the application's or the
    operator's to drop."""
    async with engine.begin() as conn:
        await conn.execute(text(index_sql(conn.dialect, name, table, columns, where)))
        # the predicate follows the key list in the definition the database keeps
        columns = f"{columns} WHERE {where}" if where else columns
        covers = await index_covers(conn, name, table, columns)
    if covers:
        logger.warning(
            "task store: index %s covers %s, not %s (%s): the agent's reads of %r go "
            "without it; drop it and restart, and the agent creates its own "
            "(docs/storage.md, *Database schema upgrades*)",
            *(name, covers, table, columns, table),
        )


# Whether an index of our name is the one our reads need, at start, on the agent's own
# stores (after ``CREATE INDEX IF NOT EXISTS``, which takes any index of that name for
# built) and on an application's own ``DatabaseTaskStore`` (``listing.py``). An index
# counts only as a whole B-tree over our key list, in order, as the database keeps its
# definition, without a predicate (other than ours, spelled as the database keeps it:
# ``running.py``), an order, a collation or an operator class of its own, and (PostgreSQL)
# valid: a partial index, another status expression, a hash index or one a ``CREATE INDEX
# CONCURRENTLY`` cut short left invalid serves no query of ours, or not every one.
#: the table and definition (SQL) of the index named :i, which shares one namespace with
#: every index of the table :t's schema (catalog reads: no lock); PostgreSQL's, whether a
#: build left it whole (a ``CREATE INDEX CONCURRENTLY`` cut short leaves it invalid)
_DEFINITIONS = {
    "sqlite": text("SELECT tbl_name, sql, 1 FROM sqlite_master WHERE type = 'index' AND name = :i"),
    # the schema of the table the statements' unqualified name resolves to
    "postgresql": text(
        "SELECT t.relname, pg_get_indexdef(i.oid), x.indisvalid FROM pg_class i "
        "JOIN pg_index x ON x.indexrelid = i.oid JOIN pg_class t ON t.oid = x.indrelid "
        "WHERE i.relname = :i AND i.relnamespace = "
        "(SELECT relnamespace FROM pg_class WHERE oid = to_regclass(quote_ident(:t)))"
    ),
}
#: what an index covers in its definition: the method (PostgreSQL's), then from its key list
#: on (a predicate, an order, a collation or an operator class included)
_COVERS = re.compile(r"(?:\sUSING\s+(\w+)\s*)?(\(.*)", re.S)
#: what two spellings of one key list differ by: PostgreSQL's casts of literals, white
#: space, parentheses, quoted names, the case of keywords
_SPELLING = re.compile(r"::text|[\s()\"]")


async def index_covers(conn: Any, name: str, table: str, columns: str) -> str | None:
    """What the index *name* covers (its table and key list, as the database defines it)
    where it is not the one our reads need on *table* over *columns* (SQL); ``""`` where it
    is; ``None`` where there is no index of that name. A catalog read: no lock."""
    query = _DEFINITIONS[conn.dialect.name]
    found = (await conn.execute(query, {"i": name, "t": table})).first()
    return None if found is None else _other(found, table, columns) or ""


def _other(found: Any, table: str, columns: str) -> str | None:
    """What the index *found* (its table, definition, validity) covers, where it is not the
    one our reads need: a whole B-tree index on *table* over *columns* (SQL), in order,
    without a predicate, an order, a collation or an operator class of its own, which
    PostgreSQL or SQLite can read for every query; ``None`` where it is."""
    on, definition, valid = found
    parts = _COVERS.search(definition)
    method, keys = parts.groups() if parts else (None, definition)
    covers = f"{on} {f'USING {method} ' if method not in (None, 'btree') else ''}{keys}"
    if not valid:
        return f"{covers} (invalid: its build did not finish)"
    same = _SPELLING.sub("", keys).casefold() == _SPELLING.sub("", columns).casefold()
    return None if on == table and same and method in (None, "btree") else covers


async def drop_index(engine: AsyncEngine, name: str) -> None:
    """Drop the index *name* if it exists.

    PostgreSQL drops it ``CONCURRENTLY`` (outside a transaction, as it must be): a plain
    ``DROP INDEX`` waits for an exclusive lock on the table, and every later read of the
    table queues behind it until the oldest transaction using the table ends, so one
    replica of a new release starting beside serving ones stalled them all. A drop cut
    short leaves the index invalid; the next start's drop finishes it.
    """
    async with engine.connect() as conn:
        quote = conn.dialect.identifier_preparer.quote
        if conn.dialect.name == "postgresql":
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(name)}"))
            return
        async with conn.begin():
            await conn.execute(text(f"DROP INDEX IF EXISTS {quote(name)}"))


async def raced(step: Callable[[], Awaitable[None]]) -> None:
    """Run a start *step* again when it lost a race with another process starting on
    the same database: both can see a table or index missing and create it (the loser
    sees a duplicate error), and SQLite refuses a connection while another switches a new
    file to WAL ("database is locked"); a later pass finds it done."""
    for attempt in range(5):
        try:
            await step()
            return
        except DBAPIError as exc:
            text = str(exc).lower()
            # SQLite reports the lost race ("already exists", "locked") as an
            # OperationalError, the same class as an unreachable database.
            lost = "already exists" in text or "database is locked" in text
            if (isinstance(exc, UNAVAILABLE) and not lost) or attempt == 4:
                raise
            logger.debug("start step raced with another process; retrying")
            await asyncio.sleep(0.1 * (attempt + 1))


def create_engine(store_url: StoreURL) -> AsyncEngine:
    """Create (without connecting) the engine for a SQL :class:`StoreURL`."""
    if store_url.url is None:
        raise ValueError(f"{store_url.display} is not a SQL task store")
    if store_url.kind == "sqlite":
        return _sqlite_engine(store_url)
    connect_args = dict(store_url.connect_args)
    if store_url.pgbouncer:
        # SQLAlchemy prepares every statement itself: uncached and unnamed (``str()`` is
        # ``""``), as a named one outlives its transaction on a server connection that
        # other clients share.
        connect_args["prepared_statement_cache_size"] = 0
        connect_args["prepared_statement_name_func"] = str
    return create_async_engine(
        store_url.url,
        pool_pre_ping=True,
        # Half kept open, half opened under load and closed again.
        pool_size=(store_url.pool_size + 1) // 2,
        max_overflow=store_url.pool_size // 2,
        connect_args=connect_args,
    )


def _sqlite_engine(store_url: StoreURL) -> AsyncEngine:
    assert store_url.url is not None
    in_memory = store_url.sqlite_path is None
    # Few connections: SQLite runs one writer at a time anyway, and waiting in the pool
    # is fair and immediate, whereas SQLite's busy handler polls with growing sleeps
    # (seconds of tail latency with many contenders). More than one lets one request's
    # Python work overlap another's SQL. The busy timeout covers other processes.
    kwargs: dict[str, Any] = {"pool_size": 4, "max_overflow": 0}
    if in_memory:
        # One shared connection, or every checkout would see a fresh empty database.
        kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    engine = create_async_engine(store_url.url, **kwargs)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves (see module docstring).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if not in_memory:
            cursor.execute("PRAGMA journal_mode = WAL")
            # Durable against process crashes (kill -9); only an OS crash may lose the
            # last transactions, which is the documented WAL trade-off.
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Our own read-only probes opt out, so a health check never queues for the lock.
        read_only = connection.get_execution_options().get(READ_ONLY)
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def schema_key(purpose: str, of: str | None = None) -> str:
    """An advisory lock key for *purpose* in the current schema: agents of other schemas of
    the database never wait for it. A 64-bit key from the schema's name (md5: any server
    version, no internal function); an expression, so that key and lock are one statement:
    one server connection behind PgBouncer. *of*: a SQL text expression (of bind
    parameters: a caller's values are never written into SQL) naming one of several locks
    of *purpose*, hashed after the schema; without it the key is what it always was."""
    named = "" if of is None else f" || ' ' || ({of})"
    return (
        f"('x' || substr(md5('apcore-a2a {purpose} ' || coalesce(current_schema(), '')"
        f"{named}), 1, 16))::bit(64)::bigint"
    )
