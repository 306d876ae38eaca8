"""Task store URLs: which backend, which async driver, which connection options.

Users write the URL they know (``postgresql://user@host/db``, ``sqlite:///tasks.db``); we
pick the async driver SQLAlchemy needs and turn our own query parameters into driver
arguments, so nothing here touches the network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["StoreURL", "StoreUnavailableError", "parse_store_url"]

StoreKind = Literal["memory", "sqlite", "postgresql"]

_EXAMPLES = "memory://, sqlite:///path/tasks.db or postgresql://user@host/db"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_SSL_MODES = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}


class StoreUnavailableError(Exception):
    """The task store cannot be reached or used right now.

    The message names the store with its password masked, so it is safe to show to
    operators and in ``/health`` responses.
    """


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed task store URL.

    ``display`` is safe for logs and error messages (the password is masked).
    """

    kind: StoreKind
    display: str
    url: URL | None = None
    connect_args: dict[str, Any] = field(default_factory=dict)
    #: PostgreSQL: connections the engine's pool opens at most (``?pool_size=``)
    pool_size: int = 20

    @property
    def sqlite_path(self) -> str | None:
        """The database file of a file-backed SQLite URL, else ``None``."""
        if self.kind != "sqlite" or self.url is None:
            return None
        database = self.url.database
        return None if not database or database == ":memory:" else database


def parse_store_url(text: str) -> StoreURL:
    """Parse *text* into a :class:`StoreURL`.

    Raises ``ValueError`` with a message that names the accepted forms.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"task store URL is empty; expected {_EXAMPLES}")
    text = text.strip()
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme == "memory":
        if text.lower().rstrip("/") not in ("memory:", "memory:/"):
            raise ValueError(f"memory task store URL takes no path or options: {text!r}")
        return StoreURL(kind="memory", display="memory://")
    if not scheme:
        raise ValueError(f"task store URL {text!r} has no scheme; expected {_EXAMPLES}")
    try:
        url = make_url(text)
    except ArgumentError as exc:
        raise ValueError(f"cannot parse task store URL: {exc}") from None
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
    url = url.set(drivername="sqlite+aiosqlite")
    return StoreURL(kind="sqlite", display=_display(url), url=url)


def _postgres(url: URL, driver: str) -> StoreURL:
    if driver not in ("", "asyncpg"):
        raise ValueError(
            f"PostgreSQL driver {driver!r} is not supported; write postgresql://... and "
            "the async driver (asyncpg) is chosen for you"
        )
    if not url.database:
        raise ValueError("PostgreSQL task store URL names no database: postgresql://host/DBNAME")
    query = dict(url.query)
    server_settings: dict[str, str] = {}
    connect_args: dict[str, Any] = {"timeout": 5.0}
    schema = query.pop("schema", None)
    if schema is not None:
        if not isinstance(schema, str) or not _IDENTIFIER.match(schema):
            raise ValueError(f"schema must be a plain SQL identifier, got {schema!r}")
        server_settings["search_path"] = schema
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
            "sslmode, pool_size"
        )
    if server_settings:
        connect_args["server_settings"] = server_settings
    clean = url.set(drivername="postgresql+asyncpg", query={})
    display_url = url.set(drivername="postgresql")
    return StoreURL(
        kind="postgresql",
        display=_display(display_url),
        url=clean,
        connect_args=connect_args,
        pool_size=int(pool),
    )


def _display(url: URL) -> str:
    return url.render_as_string(hide_password=True)
