"""A real name server for the push tests: UDP on 127.0.0.1, started by the test.

It answers A and AAAA queries from its table, NXDOMAIN for names it does not know, and
never answers names under ``blackhole.test`` (an attacker's name server that drops every
query) until :meth:`NameServer.release`, which answers the held queries NXDOMAIN.

It serves on a thread of its own (a blocking socket), not on the test's event loop, which
the agent under test shares: a burst of lookups keeps that loop busy, and a name server
on it read (and answered) their queries only in the gaps, late enough for c-ares to
retry or give up. Here each query is read and answered as it comes, whatever the agent's
loop is doing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

A, AAAA = 1, 28
_NXDOMAIN = 3


def _question(packet: bytes) -> tuple[str, int, bytes]:
    """The name and type of a query's one question, and the question's bytes."""
    at, labels = 12, []
    while packet[at]:
        labels.append(packet[at + 1 : at + 1 + packet[at]].decode("ascii"))
        at += 1 + packet[at]
    (qtype,) = struct.unpack("!H", packet[at + 1 : at + 3])
    return ".".join(labels).lower(), qtype, packet[12 : at + 5]


def _answer(query: bytes, rcode: int, addresses: Sequence[str] = ()) -> bytes:
    _name, qtype, question = _question(query)
    records = b""
    for text in addresses:
        packed = ipaddress.ip_address(text).packed
        # The name as a pointer to the question's (offset 12), class IN, TTL 0.
        records += b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 0, len(packed)) + packed
    flags = 0x8180 | rcode  # a response, recursion desired and available
    (query_id,) = struct.unpack("!H", query[:2])
    header = struct.pack("!HHHHHH", query_id, flags, 1, len(addresses), 0, 0)
    return header + question + records


class NameServer:
    """Answers from *table* (name -> addresses, IPv4 and IPv6 mixed); ``asked`` holds
    every query's ``(name, type)``, retries included."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = {name.lower(): list(addresses) for name, addresses in table.items()}
        self.asked: list[tuple[str, int]] = []
        self.held: list[tuple[bytes, tuple[str, int]]] = []
        self.released = False
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        # A burst of lookups (300 stuck callers, each asking two types) may outrun even
        # this thread: the default buffer (rmem_default) holds about 256 small datagrams,
        # and the rest were dropped (a name never asked). Root may raise it past rmem_max;
        # anyone else gets what rmem_max allows.
        for option in (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF):
            if option is not None:
                with contextlib.suppress(OSError):
                    self._sock.setsockopt(socket.SOL_SOCKET, option, 16 * 1024 * 1024)
                    break
        host, port = self._sock.getsockname()[:2]
        self.address = f"{host}:{port}"
        self._lock = threading.Lock()  # held and released: the thread's and release()'s
        self._loop = asyncio.get_running_loop()
        self._heard = asyncio.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="test-dns", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            data, addr = self._sock.recvfrom(65535)
            if self._stopping:
                return  # close()'s wake-up, or a query that came too late
            self._received(data, addr)

    def _received(self, data: bytes, addr: tuple[str, int]) -> None:
        name, qtype, _question_bytes = _question(data)
        self.asked.append((name, qtype))
        self._loop.call_soon_threadsafe(self._heard.set)
        with self._lock:
            if name.endswith(".blackhole.test") and not self.released:
                self.held.append((data, addr))
                return
        if name not in self.table:
            self._sock.sendto(_answer(data, _NXDOMAIN), addr)
            return
        family = 6 if qtype == AAAA else 4
        matching = [a for a in self.table[name] if ipaddress.ip_address(a).version == family]
        self._sock.sendto(_answer(data, 0, matching), addr)

    def asks(self, name: str) -> int:
        """How many queries (each try, each type) *name* has had."""
        return sum(1 for asked, _type in self.asked if asked == name)

    async def until(self, check: Callable[[], bool], within: float = 120) -> None:
        """Wait until *check()* holds, looking again at each query that comes in."""
        async with asyncio.timeout(within):
            while not check():
                self._heard.clear()
                if check():  # a query that came in between
                    return
                await self._heard.wait()

    def release(self) -> None:
        """Answer the held queries (NXDOMAIN) and every later one for blackhole names."""
        with self._lock:
            self.released = True
            held, self.held = self.held, []
        for data, addr in held:
            self._sock.sendto(_answer(data, _NXDOMAIN), addr)

    def close(self) -> None:
        """Stop serving: the thread, woken by a datagram of its own, ends; then the
        socket is closed."""
        self._stopping = True
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as waker:
            waker.sendto(b"", self._sock.getsockname())
        self._thread.join()
        self._sock.close()


@contextlib.asynccontextmanager
async def name_server(
    table: Mapping[str, Sequence[str]] | None = None,
) -> AsyncIterator[NameServer]:
    """A :class:`NameServer` on a free UDP port of 127.0.0.1 (``.address``: ``ip:port``)."""
    server = NameServer(table or {})
    try:
        yield server
    finally:
        server.close()
