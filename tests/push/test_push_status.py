"""The in-memory status book: record, clear, and bounded size."""

from __future__ import annotations

from a2a.types import TaskPushNotificationConfig

from apcore_a2a.push import ConfigStatusBook
from apcore_a2a.push.status import aim


def _config(config_id: str) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(id=config_id, url=f"https://a.example/{config_id}")


async def _failures(book: ConfigStatusBook, task_id: str, *ids: str) -> dict[str, str | None]:
    """The failure reason (or ``None``) of each config *ids* of *task_id*, as stored now."""
    states = await book.of(task_id, [_config(i) for i in ids])
    return {config_id: reason for config_id, (_aim, reason) in states.items()}


async def _fail(book: ConfigStatusBook, task_id: str, config_id: str, reason: str) -> None:
    await book.fail(task_id, config_id, aim(_config(config_id), "1.0"), reason)


async def test_failures_are_recorded_and_cleared_per_config() -> None:
    book = ConfigStatusBook()
    await _fail(book, "t1", "a", "HTTP 503 (after 4 attempts)")
    await _fail(book, "t1", "b", "receiver answered HTTP 410")
    assert await _failures(book, "t1", "a", "b", "c") == {
        "a": "HTTP 503 (after 4 attempts)",
        "b": "receiver answered HTTP 410",
        "c": None,
    }
    await book.clear("t1", "a")
    assert await _failures(book, "t1", "a", "b") == {"a": None, "b": "receiver answered HTTP 410"}
    await book.forget("t1")
    assert await _failures(book, "t1", "a", "b") == {"a": None, "b": None}
    await book.clear("unknown", "x")  # nothing to clear is fine
    assert await _failures(book, "unknown", "x") == {"x": None}


async def test_memory_book_forgets_the_oldest_task_beyond_its_bound() -> None:
    book = ConfigStatusBook(max_tasks=2)
    await _fail(book, "t1", "c", "r1")
    await _fail(book, "t2", "c", "r2")
    await _fail(book, "t1", "d", "r1b")  # t1 is now the most recent
    await _fail(book, "t3", "c", "r3")
    assert await _failures(book, "t2", "c") == {"c": None}
    assert await _failures(book, "t1", "c", "d") == {"c": "r1", "d": "r1b"}
    assert await _failures(book, "t3", "c") == {"c": "r3"}
