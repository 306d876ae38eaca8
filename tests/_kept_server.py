"""A bare HTTP/1.1 server that keeps every connection open and counts them: the peer of
the keep-alive tests (the client's, push deliveries'). It notes the SNI of each TLS
connection (``sni_callback``), how many it accepted and how many are open, and each request
body it answered."""

from __future__ import annotations

import asyncio

EMPTY_OK = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"


def json_ok(body: bytes) -> bytes:
    """An answer 200 carrying the JSON *body*."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


class KeptServer:
    """Answers each request *reply* and keeps the connection open. With *drop*, requests on
    a kept connection (its second and later) are read and the connection closed unanswered,
    as a server's idle timeout closes it when a request meets it on the way; past *answers*
    requests answered, every request is dropped so. *held*, when set, holds the next
    request's answer until it is set (*holding* tells it waits)."""

    def __init__(self, reply: bytes = EMPTY_OK) -> None:
        self.reply = reply
        self.names: list[str | None] = []  # the SNI of each TLS connection, in order
        self.connections = 0
        self.open = 0
        self.answered: list[bytes] = []  # the bodies answered, in order
        self.dropped = 0
        self.drop = False
        self.answers: int | None = None
        self.held: asyncio.Event | None = None
        self.holding = asyncio.Event()

    def sni(self, _sock: object, name: str | None, _ctx: object) -> None:
        """A TLS context's ``sni_callback``: notes the name."""
        self.names.append(name)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        served = 0
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = int(head.partition("content-length:")[2].split("\r\n")[0] or 0)
                body = await reader.readexactly(length)
                if (self.drop and served) or len(self.answered) == self.answers:
                    self.dropped += 1
                    return
                served += 1
                self.answered.append(body)
                if self.held is not None:
                    held, self.held = self.held, None
                    self.holding.set()
                    await held.wait()
                writer.write(self.reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()

    async def until_open(self, count: int) -> None:
        async with asyncio.timeout(10):  # the test's own guard
            while self.open != count:
                await asyncio.sleep(0.01)
