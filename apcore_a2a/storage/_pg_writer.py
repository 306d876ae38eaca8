"""PostgreSQL writes of a group-commit writer: one connection of its own, one round trip.

Through the pooled engine the three inserts of an answer cost about 800 µs of CPU, against
about 330 µs on a plain asyncpg connection (benchmarks/RESULTS.md, 2026-11-27): so they go
as one ``WITH`` whose parts read their rows from arrays (``unnest``). Values are encoded
by SQLAlchemy's bind processors (the SDK reads the rows back unchanged); errors keep
SQLAlchemy's classes, which the group commit and the outage guard handle.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from ._urls import StoreURL

#: ``application_name`` of a writer's connection (followed by the schema or database).
WRITER_APPLICATION = "apcore-a2a writer"

#: The columns of the SDK's tables our statements write, as PostgreSQL types (the writers
#: cast to them; ``tests/upstream/test_sql_task_rows.py`` watches them, see
#: ``docs/architecture.md``).
SDK_COLUMNS: dict[str, dict[str, str]] = {
    "tasks": {
        "id": "VARCHAR(36) PRIMARY KEY",
        "context_id": "VARCHAR(36) NOT NULL",
        "kind": "VARCHAR(16) NOT NULL",
        "owner": "VARCHAR(255)",
        "last_updated": "TIMESTAMP WITHOUT TIME ZONE",
        "status": "JSON NOT NULL",
        "artifacts": "JSON",
        "history": "JSON",
        "protocol_version": "VARCHAR(16)",
        "metadata": "JSON",
    },
    "task_versions": {
        "task_id": "VARCHAR(36) PRIMARY KEY",
        "owner": "VARCHAR(255)",
        "version": "BIGINT NOT NULL",
    },
    "task_events": {
        "task_id": "VARCHAR(36) NOT NULL",
        "owner": "VARCHAR(255)",
        "task_version": "BIGINT NOT NULL",
        "event_data": "BYTEA NOT NULL",
    },
}

_Processor = Callable[[Any], Any] | None


async def pg_connect(store_url: StoreURL, application_name: str) -> Any:
    """A plain asyncpg connection to *store_url* (same options as the engine's), outside
    the pool, named ``application_name`` plus the schema or database it serves."""
    import asyncpg  # type: ignore[import-untyped]

    url = store_url.url
    assert url is not None
    args = dict(store_url.connect_args)
    server_settings = dict(args.pop("server_settings", {}))
    where = server_settings.get("search_path") or url.database
    server_settings["application_name"] = f"{application_name} {where}"[:63]
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return await asyncpg.connect(dsn, server_settings=server_settings, **args)


class PgInsert:
    """``INSERT`` into *table* of its :data:`SDK_COLUMNS`, its rows read from one array per
    column; values are encoded by *table*'s column types."""

    def __init__(self, table: Table, dialect: Dialect) -> None:
        written = SDK_COLUMNS[table.name]
        self.columns = list(written)
        names = ", ".join(dialect.identifier_preparer.quote(c) for c in self.columns)
        self._head = f"INSERT INTO {dialect.identifier_preparer.format_table(table)} ({names})"
        self._processors: list[_Processor] = [
            table.c[c].type.dialect_impl(dialect).bind_processor(dialect) for c in self.columns
        ]
        # Arrays of the base type (VARCHAR, not VARCHAR(36)), as an explicit cast to a
        # length would cut a long value silently, where the column's own assignment
        # refuses it.
        self._types = [
            re.sub(r"\(\d+\)| PRIMARY KEY| NOT NULL", "", written[c]) for c in self.columns
        ]

    def from_arrays(self, first: int) -> str:
        """This insert reading its rows from arrays ``$first``, ``$first+1``, ..."""
        arrays = ", ".join(f"${first + i}::{t}[]" for i, t in enumerate(self._types))
        # Names quoted by the dialect, types from the table, values only as parameters.
        return f"{self._head} SELECT * FROM unnest({arrays})"  # noqa: S608

    def arrays(self, rows: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """One list per column of *rows*' parameters, as SQLAlchemy would encode them."""
        return [
            [row[c] if p is None else p(row[c]) for row in rows]
            for c, p in zip(self.columns, self._processors, strict=True)
        ]


class PgWriter:
    """One batch at a time through a connection of its own (see the module doc)."""

    def __init__(self, store_url: StoreURL) -> None:
        self._store_url = store_url
        self._conn: Any = None
        self._combined: dict[tuple[PgInsert, ...], str] = {}

    async def write(self, steps: Sequence[tuple[PgInsert, Sequence[dict[str, Any]]]]) -> None:
        """Run every ``(statement, rows)`` step, all or nothing, as one statement (a
        ``WITH`` of several) in one round trip."""
        import asyncpg

        present = [(insert, rows) for insert, rows in steps if rows]
        if not present:
            return
        statement = self._statement(tuple(insert for insert, _ in present))
        try:
            conn = await self._connection()
            await conn.execute(statement, *[a for i, rows in present for a in i.arrays(rows)])
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise IntegrityError(statement, None, exc) from None
        except (
            OSError,
            asyncpg.InterfaceError,
            asyncpg.PostgresConnectionError,
            asyncpg.exceptions.OperatorInterventionError,  # the server shutting down
        ) as exc:
            self._drop()
            raise OperationalError(statement, None, exc, connection_invalidated=True) from None
        except asyncpg.PostgresError as exc:
            raise DBAPIError(statement, None, exc) from None
        except BaseException:
            # Canceled mid-transaction: the connection's state is unknown; start afresh.
            self._drop()
            raise

    def _statement(self, inserts: tuple[PgInsert, ...]) -> str:
        sql = self._combined.get(inserts)
        if sql is None:
            parts, first = [], 1
            for insert in inserts:
                parts.append(insert.from_arrays(first))
                first += len(insert.columns)
            ctes = ", ".join(f"s{i} AS ({part})" for i, part in enumerate(parts[:-1]))
            sql = self._combined[inserts] = f"WITH {ctes} {parts[-1]}" if ctes else parts[-1]
        return sql

    async def aclose(self) -> None:
        """Close the connection (a later write opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            self._drop()
            self._conn = await pg_connect(self._store_url, WRITER_APPLICATION)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()
