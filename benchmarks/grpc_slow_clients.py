"""Slow and silent clients against the gRPC port: what each holds, and for how long.

Run: ``.venv/bin/python -m benchmarks.grpc_slow_clients [--count 200] [--watch 60]
[settings as JSON]``. Serves the ops agent with ``serve()`` in a child process (gRPC on),
then opens, with raw HTTP/2 (``tests/_h2raw.py``, PINGs answered):

- ``silent``: TCP connections that send nothing;
- ``preface``: connections that send the HTTP/2 preface and SETTINGS, then nothing;
- ``unary`` / ``stream``: a ``SendMessage`` / ``SendStreamingMessage`` call whose HEADERS
  and part of a length-prefixed message arrive, never the rest nor END_STREAM (one call
  per connection).

With ``--one-connection N [--rate R]`` it opens instead N stalled ``SendMessage`` calls
(HEADERS only) on ONE connection, R a second, and prints the child's RSS, how many calls
the server ended (refused past ``grpc_max_pending_requests``, or timed out) and a good
client's call time on another connection.

With ``--idle N`` it opens instead, all from 127.0.0.1, N gRPC connections that send the
preface and SETTINGS then nothing, N HTTP connections that send nothing, and N HTTP
connections that get one answer (``GET /health``) and then send nothing: how long each
kind lives, what they cost the server (RSS, descriptors), and whether another client's
gRPC and HTTP calls are still served meanwhile. ``--nofile N`` gives the server child a
descriptor limit of N (``ulimit -n``; many hosts' default for a service is 1024), and
``--grpc-only`` opens the gRPC connections alone.

It prints, every few seconds, how many of each are still open (or, for calls, not
ended), the child's RSS and open descriptors, and how long a good client's call takes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import grpc
import grpc.aio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests._h2raw import Peer, partial_message
from tests._support import free_port
from tests.ops._proc import serve_process

V1 = "/lf.a2a.v1.A2AService"


def _child_stats(pid: int) -> tuple[int, int]:
    """(RSS in MiB, open descriptors) of process *pid*."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    return rss_kib // 1024, len(os.listdir(f"/proc/{pid}/fd"))


async def _good_call(address: str) -> str:
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    started = time.perf_counter()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            await stub.GetTask(
                a2a_pb2.GetTaskRequest(id="probe"), metadata=(("a2a-version", "1.0"),), timeout=10
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                return f"failed {exc.code().name}"
    return f"{(time.perf_counter() - started) * 1000:.0f} ms"


async def _good_http(url: str) -> str:
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            status = (await client.get(url + "/health")).status_code
    except httpx.HTTPError as exc:
        return f"failed {type(exc).__name__}"
    return f"{status} in {(time.perf_counter() - started) * 1000:.0f} ms"


class _HttpIdle:
    """One raw HTTP/1.1 connection: nothing sent (*ask* False) or one ``GET /health``
    then nothing; ``closed`` is when the server closed it (EOF), after the start."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.closed: float | None = None
        self._reading = asyncio.ensure_future(self._read(reader))

    @classmethod
    async def open(cls, port: int, ask: bool) -> _HttpIdle:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        if ask:
            writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return cls(reader, writer)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass
        self.closed = time.monotonic()

    def close(self) -> None:
        self._reading.cancel()
        self.writer.close()


async def idle(
    count: int, watch: float, nofile: int, with_http: bool, settings: dict[str, object]
) -> None:
    """*count* idle connections of each kind from one address (see the module doc)."""
    grpc_port = free_port()
    with serve_process(None, grpc_port=grpc_port, **settings) as (url, proc):
        if nofile:
            resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (nofile, nofile))
        address = f"127.0.0.1:{grpc_port}"
        http_port = int(url.rsplit(":", 1)[1])
        await asyncio.sleep(1)
        print("settings:", settings or "defaults", f"nofile {nofile or 'as is'}")
        print(
            "before: rss {} MiB, fds {};".format(*_child_stats(proc.pid)),
            f"good gRPC call {await _good_call(address)}, HTTP {await _good_http(url)}",
        )
        started = time.monotonic()
        grpc_peers = [await _open("preface", grpc_port) for _ in range(count)]
        http = count if with_http else 0
        silent = [await _HttpIdle.open(http_port, ask=False) for _ in range(http)]
        answered = [await _HttpIdle.open(http_port, ask=True) for _ in range(http)]
        print(f"opened {count + 2 * http} connections in {time.monotonic() - started:.1f} s")
        kinds = ("grpc preface", "http silent", "http kept")
        closed: dict[str, float | None] = dict.fromkeys(kinds)
        while time.monotonic() - started < watch:
            alive = {
                "grpc preface": sum(not p.seen.closed for p in grpc_peers),
                "http silent": sum(c.closed is None for c in silent),
                "http kept": sum(c.closed is None for c in answered),
            }
            elapsed = time.monotonic() - started
            for kind, left in alive.items():
                if not left and closed[kind] is None:
                    closed[kind] = elapsed
            rss, fds = _child_stats(proc.pid)
            print(
                f"t={elapsed:5.1f}s open {alive} rss {rss} MiB fds {fds}; good gRPC call"
                f" {await _good_call(address)}, HTTP {await _good_http(url)}",
                flush=True,
            )
            if all(v is not None for v in closed.values()):
                break
            await asyncio.sleep(2 if elapsed < 30 else 10)
        print("all closed after (s):", {k: v and round(v, 1) for k, v in closed.items()})
        for peer in grpc_peers:
            await peer.close()
        for conn in silent + answered:
            conn.close()


async def _open(kind: str, port: int) -> Peer:
    peer = await Peer.open("127.0.0.1", port)
    authority = f"127.0.0.1:{port}"
    if kind != "silent":
        peer.preface()
    if kind == "unary":
        peer.start_call(1, authority, f"{V1}/SendMessage", partial_message())
    elif kind == "stream":
        peer.start_call(1, authority, f"{V1}/SendStreamingMessage", partial_message())
    return peer


def _alive(kind: str, peer: Peer) -> bool:
    if kind in ("silent", "preface"):
        return not peer.seen.closed
    return not peer.seen.ended(1) and not peer.seen.closed


async def main(count: int, watch: float, settings: dict[str, object]) -> None:
    grpc_port = free_port()
    with serve_process(None, grpc_port=grpc_port, **settings) as (_url, proc):
        address = f"127.0.0.1:{grpc_port}"
        await asyncio.sleep(1)
        print("settings:", settings or "defaults")
        print(
            "before: rss {} MiB, fds {};".format(*_child_stats(proc.pid)),
            "good call",
            await _good_call(address),
        )
        kinds = ("silent", "preface", "unary", "stream")
        peers = {kind: [await _open(kind, grpc_port) for _ in range(count)] for kind in kinds}
        started = time.monotonic()
        await asyncio.sleep(1)
        freed: dict[str, float | None] = dict.fromkeys(kinds)
        while time.monotonic() - started < watch:
            elapsed = time.monotonic() - started
            alive = {kind: sum(_alive(kind, p) for p in peers[kind]) for kind in kinds}
            for kind in kinds:
                if alive[kind] == 0 and freed[kind] is None:
                    freed[kind] = elapsed
            rss, fds = _child_stats(proc.pid)
            print(
                f"t={elapsed:5.1f}s open/unended {alive} rss {rss} MiB fds {fds};"
                f" good call {await _good_call(address)}",
                flush=True,
            )
            if all(v is not None for v in freed.values()):
                break
            await asyncio.sleep(5)
        print(
            "all released after (s):",
            {k: None if v is None else round(v, 1) for k, v in freed.items()},
        )
        for kind in kinds:
            for peer in peers[kind]:
                await peer.close()


async def flood(count: int, rate: float, watch: float, settings: dict[str, object]) -> None:
    """*count* stalled calls on one connection, *rate* a second (see the module doc)."""
    grpc_port = free_port()
    with serve_process(None, grpc_port=grpc_port, **settings) as (_url, proc):
        address = f"127.0.0.1:{grpc_port}"
        await asyncio.sleep(1)
        print("settings:", settings or "defaults")
        print(
            "before: rss {} MiB, fds {};".format(*_child_stats(proc.pid)),
            "good call",
            await _good_call(address),
        )
        peer = await Peer.open("127.0.0.1", grpc_port)
        peer.preface()
        authority = f"127.0.0.1:{grpc_port}"

        def report(label: str) -> str:
            rss, fds = _child_stats(proc.pid)
            ended = len(peer.seen.finished | set(peer.seen.resets))
            return f"{label}: rss {rss} MiB fds {fds}, ended {ended}, closed {peer.seen.closed}"

        started = time.monotonic()
        sent = 0
        while sent < count:
            due = min(count, int((time.monotonic() - started) * rate) + 1)
            for stream in range(sent, due):
                peer.start_call(1 + 2 * stream, authority, f"{V1}/SendMessage")
            sent = due
            await peer.writer.drain()
            if sent % max(1, int(rate * 5)) < max(1, int(rate / 10)):
                good = await _good_call(address)
                print(f"{report(f'sent {sent}')}; good call {good}", flush=True)
            await asyncio.sleep(0.1)
        while time.monotonic() - started < watch:
            await asyncio.sleep(5)
            elapsed = time.monotonic() - started
            good = await _good_call(address)
            print(f"{report(f't={elapsed:5.1f}s')}; good call {good}", flush=True)
        await peer.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--watch", type=float, default=60.0)
    parser.add_argument("--one-connection", type=int, default=0, metavar="N")
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--idle", type=int, default=0, metavar="N")
    parser.add_argument("--nofile", type=int, default=0, metavar="N")
    parser.add_argument("--grpc-only", action="store_true")
    parser.add_argument("settings", nargs="?", default="{}")
    args = parser.parse_args()
    given = json.loads(args.settings)
    if args.idle:
        asyncio.run(idle(args.idle, args.watch, args.nofile, not args.grpc_only, given))
    elif args.one_connection:
        asyncio.run(flood(args.one_connection, args.rate, args.watch, given))
    else:
        asyncio.run(main(args.count, args.watch, given))
