"""A hostile HTTP/2 peer in raw bytes, for the gRPC slow-client tests and benchmark.

Just enough of RFC 9113 to open a connection, start a gRPC call and stop wherever the
attacker likes: the preface, SETTINGS, HEADERS (HPACK literals, no Huffman, no table),
DATA, PING acks. No real client library would send a call and then nothing, so none is
used here.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from dataclasses import dataclass, field

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One frame: 24-bit length, type, flags, 31-bit stream id, payload."""
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _hpack_int(value: int, prefix: int) -> bytes:
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes([value])
    out = [limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def header_block(headers: list[tuple[str, str | bytes]]) -> bytes:
    """HPACK: each header a literal without indexing, new name, no Huffman (a value given
    as bytes is sent as they are)."""
    block = b""
    for name, value in headers:
        raw_name = name.encode()
        raw_value = value if isinstance(value, bytes) else value.encode()
        block += b"\x00" + _hpack_int(len(raw_name), 7) + raw_name
        block += _hpack_int(len(raw_value), 7) + raw_value
    return block


def grpc_headers(authority: str, path: str, version: str = "1.0") -> bytes:
    """The HEADERS payload of a gRPC call to *path* (``/service/Method``)."""
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    if version:
        headers.append(("a2a-version", version))
    return header_block(headers)


def message(payload: bytes) -> bytes:
    """*payload* (a serialized protobuf) as a length-prefixed gRPC message."""
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def partial_message(declared: int = 1000, sent: int = 10) -> bytes:
    """A length-prefixed gRPC message that announces *declared* bytes and carries *sent*."""
    return b"\x00" + struct.pack(">I", declared) + b"\x0a" * sent


@dataclass
class Seen:
    """What the server sent on one connection, frame by frame."""

    kinds: list[int] = field(default_factory=list)
    #: stream id -> the header blocks (raw HPACK) and RST_STREAM codes it got
    headers: dict[int, list[bytes]] = field(default_factory=dict)
    resets: dict[int, int] = field(default_factory=dict)
    #: the streams a HEADERS frame with END_STREAM ended (trailers, or trailers-only)
    finished: set[int] = field(default_factory=set)
    closed: bool = False

    def ended(self, stream: int) -> bool:
        """Whether *stream* got its trailers or a reset."""
        return stream in self.finished or stream in self.resets


class Peer:
    """One raw connection: write frames, read what the server sends (answering PINGs, as
    any HTTP/2 implementation does, so keepalive cannot tell it from a live client)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.seen = Seen()
        #: a peer that never sent its preface answers nothing either (its bytes would be
        #: a protocol error, and the server would close the connection at once)
        self.talking = False
        #: False: the peer acknowledges no PING (a client that vanished without FIN or
        #: RST looks so to the server)
        self.answering_pings = True
        self._reading = asyncio.ensure_future(self._read())

    @classmethod
    async def open(cls, host: str, port: int) -> Peer:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def preface(self) -> None:
        """The client's connection preface: the magic string and an empty SETTINGS."""
        self.send(PREFACE + frame(SETTINGS, 0, 0))
        self.talking = True

    def start_call(self, stream: int, authority: str, path: str, body: bytes = b"") -> None:
        """HEADERS for a call on *stream*, then *body* as DATA without END_STREAM."""
        self.send(frame(HEADERS, END_HEADERS, stream, grpc_headers(authority, path)))
        if body:
            self.send(frame(DATA, 0, stream, body))

    def finish_call(self, stream: int, body: bytes) -> None:
        """*body* as the last DATA of *stream* (END_STREAM): the call's request is in."""
        self.send(frame(DATA, END_STREAM, stream, body))

    def cancel(self, stream: int) -> None:
        """RST_STREAM CANCEL on *stream*: the client gives the call up."""
        self.send(frame(RST_STREAM, 0, stream, struct.pack(">I", 0x8)))

    async def _read(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(9)
                length = int.from_bytes(head[:3], "big")
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = await self.reader.readexactly(length)
                self.seen.kinds.append(kind)
                if not self.talking:
                    continue
                if kind == SETTINGS and not flags & ACK:
                    self.send(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK and self.answering_pings:
                    self.send(frame(PING, ACK, 0, payload))
                elif kind == HEADERS:
                    self.seen.headers.setdefault(stream, []).append(payload)
                    if flags & END_STREAM:
                        self.seen.finished.add(stream)
                elif kind == RST_STREAM:
                    self.seen.resets[stream] = int.from_bytes(payload[:4], "big")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.seen.closed = True

    async def until_closed(self, guard: float) -> Seen:
        """Wait (at most *guard* seconds) for the server to close the connection."""
        await asyncio.wait_for(asyncio.shield(self._reading), guard)
        return self.seen

    async def until_ended(self, stream: int, guard: float) -> Seen:
        """Wait (at most *guard* seconds) for *stream* to end: trailers, reset or close."""
        async with asyncio.timeout(guard):
            while not self.seen.ended(stream) and not self.seen.closed:
                await asyncio.sleep(0.05)
        return self.seen

    async def close(self) -> None:
        self.writer.close()
        self._reading.cancel()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


async def undecodable_to_plain_server(value: bytes) -> list[tuple[str, str]]:
    """Send *value* as a metadata value (``x-note``) to a plain ``grpc.aio`` echo server of
    this process, through raw frames (grpc's own clients refuse such bytes): the metadata
    its handler read."""
    import grpc
    import grpc.aio

    seen: list[tuple[str, str]] = []

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.extend(context.invocation_metadata() or ())  # type: ignore[arg-type]
        return request

    handler = grpc.method_handlers_generic_handler(
        "plain.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server = grpc.aio.server(handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    peer = await Peer.open("127.0.0.1", port)
    try:
        peer.preface()
        head = grpc_headers("127.0.0.1", "/plain.Echo/Echo", version="")
        peer.send(frame(HEADERS, END_HEADERS, 1, head + header_block([("x-note", value)])))
        peer.finish_call(1, message(b"hi"))
        await peer.until_ended(1, 30)
    finally:
        await peer.close()
        await server.stop(None)
    return seen
