"""A raw asyncio webhook receiver that misbehaves on purpose (no HTTP framework in the way).

Modes: ``ok`` answers 204 at once; ``huge`` answers with a body of ``size`` bytes (1 GiB by
default) as fast as the socket takes it; ``drip-headers`` sends its status line and
headers one byte every ``interval`` seconds, forever (``limit`` bytes); ``drip-body`` sends
complete headers, then the body one byte every ``interval``; ``stall`` reads the request
and never answers until :meth:`release`.

Each connection is recorded (:class:`Conn`): when it opened, when the agent closed it
(seen as end-of-file or a reset) and how many bytes the receiver managed to send;
``peak`` is the most connections it ever had open at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from .._support import free_port


@dataclass
class Conn:
    opened: float
    request: bytes = b""
    closed: float | None = None
    sent: int = 0

    @property
    def duration(self) -> float:
        assert self.closed is not None
        return self.closed - self.opened


@dataclass
class HostileReceiver:
    mode: str
    size: int = 1 << 30
    interval: float = 0.2
    limit: int = 10_000
    status: int = 200
    conns: list[Conn] = field(default_factory=list)
    url: str = ""
    #: connections open right now, and the most ever open at once
    open: int = 0
    peak: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    _release: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self._release.set()

    def closed(self) -> list[Conn]:
        return [c for c in self.conns if c.closed is not None]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"receiver condition not met in {timeout}s: {self.conns}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Conn(opened=time.monotonic())
        self.conns.append(conn)
        self.open += 1
        self.peak = max(self.peak, self.open)
        self.changed.set()
        try:
            conn.request = await _read_request(reader)
            # The agent closing its end shows up as EOF on our side.
            gone = asyncio.ensure_future(reader.read(1))
            try:
                await self._answer(conn, writer, gone)
            finally:
                gone.cancel()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open -= 1
            conn.closed = time.monotonic()
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
            self.changed.set()

    async def _answer(
        self, conn: Conn, writer: asyncio.StreamWriter, gone: asyncio.Future[bytes]
    ) -> None:
        if self.mode == "ok":
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
        elif self.mode == "stall":
            await asyncio.wait(
                [gone, asyncio.ensure_future(self._release.wait())],
                return_when=asyncio.FIRST_COMPLETED,
            )
        elif self.mode == "huge":
            head = f"HTTP/1.1 {self.status} X\r\nContent-Length: {self.size}\r\n\r\n".encode()
            writer.write(head)
            chunk = b"\0" * 65536
            while conn.sent < self.size and not gone.done():
                writer.write(chunk)
                conn.sent += len(chunk)
                await writer.drain()
        elif self.mode in ("drip-headers", "drip-body"):
            if self.mode == "drip-body":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                text = b"x" * self.limit
            else:
                text = b"HTTP/1.1 200 OK\r\nX-Drip: " + b"x" * self.limit
            for byte in text:
                writer.write(bytes([byte]))
                await writer.drain()
                conn.sent += 1
                await asyncio.wait([gone], timeout=self.interval)
                if gone.done():
                    return
        else:  # pragma: no cover - a typo in a test
            raise ValueError(self.mode)


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return head + await reader.readexactly(length)


@contextlib.asynccontextmanager
async def hostile(mode: str, **kwargs: object) -> AsyncIterator[HostileReceiver]:
    rec = HostileReceiver(mode, **kwargs)  # type: ignore[arg-type]
    port = free_port()
    server = await asyncio.start_server(rec._handle, "127.0.0.1", port)
    rec.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield rec
    finally:
        rec.release()
        server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 5)
