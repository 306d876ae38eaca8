"""A real name server for the push tests: UDP on 127.0.0.1, started by the test.

It answers A and AAAA queries from its table, NXDOMAIN for names it does not know, and
never answers names under ``blackhole.test`` (an attacker's name server that drops every
query) until :meth:`NameServer.release`, which answers the held queries NXDOMAIN.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import cast

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


class NameServer(asyncio.DatagramProtocol):
    """Answers from *table* (name -> addresses, IPv4 and IPv6 mixed); ``asked`` holds
    every query's ``(name, type)``, retries included."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self.table = {name.lower(): list(addresses) for name, addresses in table.items()}
        self.asked: list[tuple[str, int]] = []
        self.held: list[tuple[bytes, tuple[str, int]]] = []
        self.released = False
        self.address = ""
        self._heard = asyncio.Event()
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)
        host, port = transport.get_extra_info("sockname")[:2]
        self.address = f"{host}:{port}"

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self._transport is not None
        name, qtype, _question_bytes = _question(data)
        self.asked.append((name, qtype))
        self._heard.set()
        if name.endswith(".blackhole.test") and not self.released:
            self.held.append((data, addr))
            return
        if name not in self.table:
            self._transport.sendto(_answer(data, _NXDOMAIN), addr)
            return
        family = 6 if qtype == AAAA else 4
        matching = [a for a in self.table[name] if ipaddress.ip_address(a).version == family]
        self._transport.sendto(_answer(data, 0, matching), addr)

    def asks(self, name: str) -> int:
        """How many queries (each try, each type) *name* has had."""
        return sum(1 for asked, _type in self.asked if asked == name)

    async def until(self, check: Callable[[], bool], within: float = 120) -> None:
        """Wait until *check()* holds, looking again at each query that comes in."""
        async with asyncio.timeout(within):
            while not check():
                self._heard.clear()
                await self._heard.wait()

    def release(self) -> None:
        """Answer the held queries (NXDOMAIN) and every later one for blackhole names."""
        assert self._transport is not None
        self.released = True
        for data, addr in self.held:
            self._transport.sendto(_answer(data, _NXDOMAIN), addr)
        self.held.clear()


@contextlib.asynccontextmanager
async def name_server(
    table: Mapping[str, Sequence[str]] | None = None,
) -> AsyncIterator[NameServer]:
    """A :class:`NameServer` on a free UDP port of 127.0.0.1 (``.address``: ``ip:port``)."""
    loop = asyncio.get_running_loop()
    transport, server = await loop.create_datagram_endpoint(
        lambda: NameServer(table or {}), local_addr=("127.0.0.1", 0)
    )
    # The agent under test shares this loop: while it starts a burst of lookups, their
    # queries queue in the socket, whose default buffer (rmem_default) holds about 256
    # small datagrams, and the rest were dropped (a name never asked). Root may raise it
    # past rmem_max; anyone else gets what rmem_max allows.
    sock = transport.get_extra_info("socket")
    for option in (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF):
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, option, 16 * 1024 * 1024)
                break
    try:
        yield server
    finally:
        transport.close()
