"""PostgreSQL writes of a group-commit writer through one connection of its own.

A batch sent through the pooled engine pays, per transaction, for the pool checkout, the
pre-ping round trip and SQLAlchemy's execution machinery: about 800 µs of CPU on our side
for the three inserts of a cluster answer, against about 330 µs through one asyncpg
connection that the writer keeps (measured 2026-11-27, see benchmarks/RESULTS.md). The
writer is a single coroutine (:class:`~._group_commit.GroupCommit`), so one connection is
enough; it is opened on first use, and again once it is found closed (a database restart),
which is what the pool's pre-ping gave.

Rows are the dicts the Core statements took, encoded by SQLAlchemy's own bind processors
for each column's type, so the database holds what SQLAlchemy would have written and the
SDK's stores read it back unchanged. Errors keep SQLAlchemy's classes -- ``IntegrityError``
for a row conflict, ``OperationalError`` for a lost connection -- which ``GroupCommit``,
the cluster writer and the outage guard already handle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from ._urls import StoreURL

__all__ = ["WRITER_APPLICATION", "PgInsert", "PgWriter", "pg_connect"]

#: ``application_name`` of a writer's connection (followed by the schema or database).
WRITER_APPLICATION = "apcore-a2a writer"

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
    return await asyncpg.connect(
        host=url.host,
        port=url.port,
        user=url.username,
        password=url.password,
        database=url.database,
        server_settings=server_settings,
        **args,
    )


class PgInsert:
    """``INSERT`` of *columns* into *table* (an upsert on *conflict_key* when given)."""

    def __init__(
        self,
        table: Table,
        columns: Sequence[str],
        dialect: Dialect,
        *,
        conflict_key: str | None = None,
    ) -> None:
        quote = dialect.identifier_preparer.quote
        names = ", ".join(quote(c) for c in columns)
        marks = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
        sql = f"INSERT INTO {dialect.identifier_preparer.format_table(table)} ({names}) "
        sql += f"VALUES ({marks})"
        if conflict_key is not None:
            updates = ", ".join(
                f"{quote(c)} = EXCLUDED.{quote(c)}" for c in columns if c != conflict_key
            )
            sql += f" ON CONFLICT ({quote(conflict_key)}) DO UPDATE SET {updates}"
        self.sql = sql
        self._columns = list(columns)
        self._processors: list[_Processor] = [
            table.c[c].type.dialect_impl(dialect).bind_processor(dialect) for c in columns
        ]

    def values(self, row: dict[str, Any]) -> tuple[Any, ...]:
        """*row*'s parameters, in column order, as SQLAlchemy would encode them."""
        return tuple(
            row[c] if p is None else p(row[c])
            for c, p in zip(self._columns, self._processors, strict=True)
        )


class PgWriter:
    """One transaction at a time through a connection of its own (see the module doc)."""

    def __init__(self, store_url: StoreURL) -> None:
        self._store_url = store_url
        self._conn: Any = None

    async def write(self, steps: Sequence[tuple[PgInsert, Sequence[dict[str, Any]]]]) -> None:
        """Run every ``(statement, rows)`` step in one transaction, in order."""
        import asyncpg

        statement = ""
        try:
            conn = await self._connection()
            async with conn.transaction():
                for insert, rows in steps:
                    if rows:
                        statement = insert.sql
                        await conn.executemany(statement, [insert.values(r) for r in rows])
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise IntegrityError(statement, None, exc) from None
        except (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError) as exc:
            self._drop()
            raise OperationalError(statement, None, exc, connection_invalidated=True) from None
        except asyncpg.PostgresError as exc:
            if isinstance(exc, asyncpg.exceptions.OperatorInterventionError):  # shutdown
                self._drop()
                raise OperationalError(statement, None, exc, connection_invalidated=True) from None
            raise DBAPIError(statement, None, exc) from None
        except BaseException:
            # Canceled mid-transaction: the connection's state is unknown; start afresh.
            self._drop()
            raise

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
