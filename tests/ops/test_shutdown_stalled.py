"""A client that stops reading its SSE stream holds no stop, and costs other streams nothing.

The client opens a stream (JSON-RPC ``SendStreamingMessage`` or ``SubscribeToTask``, REST
``/message:stream``) on a raw socket with a receive window of a few kB, reads the first
event and then nothing, without closing: ``ops.chunks`` streams megabytes, so the agent's
send buffer fills and its send to that client waits for ever. Meanwhile another client
reads a whole stream (of another task, or of the same task), and one more streams a task
still running when the stop comes. Then SIGTERM, with ``shutdown_timeout`` 600 s: the
drain has nothing to wait for, the stalled stream's last event cannot go, and uvicorn
waited for its connection until its bound (``shutdown_timeout`` + 3 s) then cancelled it
with ERROR lines; the stream is now cut once it has had ``STREAM_DELIVERY`` seconds after
the drain to take its last event, with one WARNING line, and the process exits 0. The
guard below only ends a wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._support import TLS, chunks_of
from ._agent import message_params, read_stream, rpc, streaming_body, wait_state
from ._proc import serve_process

#: How long a test waits for the agent to act: a hang guard only.
GUARD = 60.0
#: 7.5 MB a stream: past the agent's socket buffer (4 MB at most here) and asyncio's.
COUNT, SIZE = 150, 50_000
_DONE = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED"}


def _stalled(port: int, method: str, path: str, body: dict[str, Any]) -> socket.socket:
    """A connection that sent *body* and read up to its first whole event, then stops."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(GUARD)
    sock.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nA2A-Version: 1.0\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    received = b""
    while not re.search(rb"\ndata:[^\n]*\n\r?\n", received):
        chunk = sock.recv(1024)
        assert chunk, received
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock


def _chunks(gate: Path) -> dict[str, Any]:
    return {"count": COUNT, "size": SIZE, "path": str(gate)}


async def _chunk_numbers(
    http: httpx.AsyncClient, body: dict[str, Any], events: list[dict[str, Any]]
) -> str:
    """Read a whole JSON-RPC stream into *events*; its last state, once every chunk came
    in order."""
    await read_stream(http, body, events)
    numbers, state = chunks_of([event["result"] for event in events])
    assert numbers == list(range(COUNT)), numbers[:5]
    return state


@pytest.mark.parametrize("call", ["jsonrpc-stream", "rest-stream", "jsonrpc-subscribe"])
async def test_a_stream_whose_client_stops_reading_holds_no_stop(tmp_path: Path, call: str) -> None:
    gate = tmp_path / "go"
    seen: list[dict[str, Any]] = []  # what the other reader gets
    with serve_process(shutdown_timeout=600) as (url, proc):
        port = int(url.rsplit(":", 1)[1])
        async with httpx.AsyncClient(base_url=url, timeout=GUARD, verify=TLS) as http:
            if call == "jsonrpc-subscribe":
                params = message_params("ops.chunks", _chunks(gate), return_immediately=True)
                task = (await rpc(http, "SendMessage", params))["result"]["task"]
                subscribe = {"method": "SubscribeToTask", "params": {"id": task["id"]}}
                body = {"jsonrpc": "2.0", "id": 2, **subscribe}
                sock = await asyncio.to_thread(_stalled, port, "POST", "/", body)
                # another reader of the same task
                other = asyncio.ensure_future(_chunk_numbers(http, body, seen))
            else:
                body = streaming_body("ops.chunks", _chunks(gate))
                method, path = "POST", "/"
                if call == "rest-stream":
                    body, path = body["params"], "/message:stream"
                sock = await asyncio.to_thread(_stalled, port, method, path, body)
                # a reader of another task
                other = asyncio.ensure_future(
                    _chunk_numbers(http, streaming_body("ops.chunks", _chunks(gate)), seen)
                )
            try:
                async with asyncio.timeout(GUARD):  # the other reader's stream is open
                    while not seen and not other.done():
                        await asyncio.sleep(0.02)
                gate.touch()
                # One stuck socket stalls no other stream: the other reader gets every chunk
                # and the end, while the stalled one's send waits.
                assert await asyncio.wait_for(other, GUARD) == "TASK_STATE_COMPLETED"
                tasks = (await rpc(http, "ListTasks", {}))["result"]["tasks"]
                for listed in tasks:
                    await wait_state(http, listed["id"], _DONE, GUARD)
                # A client whose task runs when the stop comes gets its end all the same.
                running: list[dict[str, Any]] = []
                sleeping = streaming_body("ops.sleep", {"seconds": 2})
                reading = asyncio.ensure_future(read_stream(http, sleeping, running))
                async with asyncio.timeout(GUARD):
                    while not any("statusUpdate" in e["result"] for e in running):
                        await asyncio.sleep(0.02)
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(reading, GUARD)
                try:
                    code = await asyncio.to_thread(proc.wait, GUARD)
                except subprocess.TimeoutExpired:
                    proc.kill()  # held by the stalled client: serve_process fails the test
                    raise
            finally:
                sock.close()
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert not re.search(r"\bERROR\b", out), out
    assert "timeout graceful shutdown exceeded" not in out, out
    assert len(re.findall(r"has not read what was sent to it", out)) == 1, out
    last = running[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_COMPLETED", running[-1]


def _read_slowly(sock: socket.socket) -> bytes:
    """What a slow client reads until the agent closes: a few kB at a time, 16 ms apart
    (about 0.5 MB/s: several seconds of the stream's bytes wait for it after the drain)."""
    received = bytearray()
    while chunk := sock.recv(8192):
        received += chunk
        time.sleep(0.016)
    return bytes(received)


async def test_a_slow_client_still_reading_is_not_cut(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    with serve_process(shutdown_timeout=600) as (url, proc):
        port = int(url.rsplit(":", 1)[1])
        sock = await asyncio.to_thread(
            _stalled, port, "POST", "/", streaming_body("ops.chunks", _chunks(gate))
        )
        try:
            # The stop drains the task, which streams 7.5 MB once let go: the stream gets
            # them all and its end, read slowly by a client that takes some at every look.
            proc.send_signal(signal.SIGTERM)
            async with httpx.AsyncClient(base_url=url, timeout=GUARD, verify=TLS) as http:
                async with asyncio.timeout(GUARD):  # the stop has begun: no new request
                    while True:
                        with contextlib.suppress(httpx.TransportError):
                            await http.get("/health")
                            await asyncio.sleep(0.05)
                            continue
                        break
            gate.touch()
            received = await asyncio.to_thread(_read_slowly, sock)
            code = await asyncio.to_thread(proc.wait, GUARD)
        finally:
            sock.close()
        out = proc.output()
    assert code == 0, out
    assert "has not read what was sent to it" not in out, out
    # every chunk (a slow reader's appends may come merged into fewer events), then the end
    numbers = sorted({int(n) for n in re.findall(rb'"(\d{6}):x', received)})
    assert numbers == list(range(COUNT)), (numbers[:3], numbers[-3:])
    assert b"TASK_STATE_COMPLETED" in received, received[-500:]
