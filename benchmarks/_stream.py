"""A bounded asyncio SSE load client for what wrk cannot measure: time to the first event.

Each of *connections* workers keeps one HTTP/1.1 keep-alive connection and sends
SendStreamingMessage requests back to back until the deadline. It is deliberately raw (asyncio
streams, no HTTP library) so the client spends little of the shared CPU.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_REQUEST_TIMEOUT = 30.0


@dataclass
class StreamResult:
    requests: int = 0
    events: int = 0
    bad: int = 0
    duration_s: float = 0.0
    first_event_s: list[float] = field(default_factory=list)

    @property
    def events_per_s(self) -> float:
        return self.events / self.duration_s if self.duration_s else 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    def ttfe_ms(self, q: float) -> float:
        if not self.first_event_s:
            return float("nan")
        data = sorted(self.first_event_s)
        return data[min(len(data) - 1, int(q * len(data)))] * 1e3


def _request_bytes(host: str, path: str) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {
                "message": {
                    "messageId": uuid.uuid4().hex,
                    "role": "ROLE_USER",
                    "parts": [{"text": "hello"}],
                }
            },
        }
    ).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nA2A-Version: 1.0\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _read_body_chunks(
    reader: asyncio.StreamReader, headers: dict[str, str]
) -> AsyncIterator[bytes]:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while chunk := await reader.read(65536):
            yield chunk


async def _one_stream(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, path: str
) -> tuple[float | None, int, bool]:
    """Send one request; return (seconds to first event, event count, ended COMPLETED)."""
    start = time.perf_counter()
    writer.write(_request_bytes(host, path))
    status = (await reader.readuntil(b"\r\n")).split(b" ", 2)
    headers: dict[str, str] = {}
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    first: float | None = None
    events = 0
    buffer = last = b""
    async for chunk in _read_body_chunks(reader, headers):
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            if b"data:" in event:
                events += 1
                if first is None:
                    first = time.perf_counter() - start
                last = event
    ok = status[1] == b"200" and events > 0 and b"TASK_STATE_COMPLETED" in last
    return first, events, ok


async def _worker(url: str, deadline: float, result: StreamResult) -> None:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = parts.path or "/"
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < deadline:
            try:
                first, events, ok = await asyncio.wait_for(
                    _one_stream(reader, writer, f"{host}:{port}", path), _REQUEST_TIMEOUT
                )
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                result.bad += 1
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            result.requests += 1
            result.events += events
            if first is not None:
                result.first_event_s.append(first)
            if not ok:
                result.bad += 1
    finally:
        writer.close()


async def run_streams(url: str, *, connections: int, duration: float) -> StreamResult:
    """Run *connections* concurrent streaming clients against the JSON-RPC *url*."""
    result = StreamResult()
    start = time.perf_counter()
    deadline = start + duration
    await asyncio.gather(*(_worker(url, deadline, result) for _ in range(connections)))
    result.duration_s = time.perf_counter() - start
    return result
