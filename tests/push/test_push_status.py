"""The in-memory status book: record, clear, and bounded size."""

from __future__ import annotations

from apcore_a2a.push import ConfigStatusBook


async def test_failures_are_recorded_and_cleared_per_config() -> None:
    book = ConfigStatusBook()
    await book.mark_failed("t1", "a", "HTTP 503 (after 4 attempts)")
    await book.mark_failed("t1", "b", "receiver answered HTTP 410")
    assert await book.failures("t1") == {
        "a": "HTTP 503 (after 4 attempts)",
        "b": "receiver answered HTTP 410",
    }
    assert await book.failure("t1", "c") is None
    await book.clear("t1", "a")
    assert await book.failures("t1") == {"b": "receiver answered HTTP 410"}
    await book.clear("t1")
    assert await book.failures("t1") == {}
    await book.clear("unknown", "x")  # nothing to clear is fine
    assert await book.failures("unknown") == {}


async def test_memory_book_forgets_the_oldest_task_beyond_its_bound() -> None:
    book = ConfigStatusBook(max_tasks=2)
    await book.mark_failed("t1", "c", "r1")
    await book.mark_failed("t2", "c", "r2")
    await book.mark_failed("t1", "d", "r1b")  # t1 is now the most recent
    await book.mark_failed("t3", "c", "r3")
    assert await book.failures("t2") == {}
    assert await book.failures("t1") == {"c": "r1", "d": "r1b"}
    assert await book.failures("t3") == {"c": "r3"}
