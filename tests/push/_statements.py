"""The SQL statements the push sender's workers run, watched (and held or failed) in place.

A hook sees each statement any engine of this process runs, just before it runs, in the
asyncio task that runs it: a worker of the sender is named ``a2a-push:<task>:<config>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.util import await_only

#: The push config rows (the SDK's) and our status records beside them.
PUSH_TABLES = re.compile(r"push_notification_configs|apcore_a2a_push_(failed|config)")


def in_worker() -> bool:
    """Whether the running asyncio task is one of the sender's delivery workers."""
    task = asyncio.current_task()
    return task is not None and task.get_name().startswith("a2a-push:")


@contextlib.contextmanager
def watching(hook: Callable[[str], None]) -> Iterator[None]:
    """Call *hook* with each statement before it runs; what it raises, the statement
    raises."""

    def before(*args: Any) -> None:
        hook(args[2])  # (conn, cursor, statement, parameters, context, executemany)

    event.listen(Engine, "before_cursor_execute", before)
    try:
        yield
    finally:
        event.remove(Engine, "before_cursor_execute", before)


def hold(until: asyncio.Event) -> None:
    """From a hook: hold the statement until *until* is set (the loop runs meanwhile)."""
    await_only(until.wait())
