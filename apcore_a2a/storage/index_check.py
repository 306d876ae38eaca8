"""Whether an index of our name is the one our reads need: at start, on the agent's own
stores (after ``CREATE INDEX IF NOT EXISTS``, which takes any index of that name for
built) and on an application's own ``DatabaseTaskStore`` (``own_store.py``).

An index counts only as a whole B-tree over our key list, in order, as the database keeps
its definition, without a predicate (other than ours, spelled as the database keeps it:
``running.py``), an order, a collation or an operator class of its own, and (PostgreSQL)
valid: a partial index, another status expression, a hash index or
one a ``CREATE INDEX CONCURRENTLY`` cut short left invalid serves no query of ours, or
not every one.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import text

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
