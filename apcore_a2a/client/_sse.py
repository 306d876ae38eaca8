"""A small Server-Sent Events parser (WHATWG event-stream rules) over decoded lines."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["ServerSentEvent", "iter_sse"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its type (``message`` by default), data and last id."""

    event: str
    data: str
    id: str | None = None


async def iter_sse(lines: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """Yield events from *lines* (line terminators already removed).

    Comment lines (``: ping``) are keep-alives and are skipped; several ``data:`` lines
    form one payload joined with ``\\n``. An event still pending when the stream closes
    is dispatched too: some servers close right after the last ``data:`` line.
    """
    event = ""
    data: list[str] = []
    last_id: str | None = None
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield ServerSentEvent(event or "message", "\n".join(data), last_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
    if data:
        yield ServerSentEvent(event or "message", "\n".join(data), last_id)
