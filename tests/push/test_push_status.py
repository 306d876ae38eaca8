"""The in-memory status book: record, clear, and bounded size."""

from __future__ import annotations

from apcore_a2a.push import ConfigStatusBook


async def test_failures_are_recorded_and_cleared_per_config() -> None:
    book = ConfigStatusBook()
    await book.failed.put("t1", "a", "HTTP 503 (after 4 attempts)")
    await book.failed.put("t1", "b", "receiver answered HTTP 410")
    assert await book.failed.read("t1") == {
        "a": "HTTP 503 (after 4 attempts)",
        "b": "receiver answered HTTP 410",
    }
    assert "c" not in await book.failed.read("t1")
    await book.failed.drop("t1", "a")
    assert await book.failed.read("t1") == {"b": "receiver answered HTTP 410"}
    await book.failed.drop("t1", None)
    assert await book.failed.read("t1") == {}
    await book.failed.drop("unknown", "x")  # nothing to clear is fine
    assert await book.failed.read("unknown") == {}


async def test_memory_book_forgets_the_oldest_task_beyond_its_bound() -> None:
    book = ConfigStatusBook(max_tasks=2)
    await book.failed.put("t1", "c", "r1")
    await book.failed.put("t2", "c", "r2")
    await book.failed.put("t1", "d", "r1b")  # t1 is now the most recent
    await book.failed.put("t3", "c", "r3")
    assert await book.failed.read("t2") == {}
    assert await book.failed.read("t1") == {"c": "r1", "d": "r1b"}
    assert await book.failed.read("t3") == {"c": "r3"}
