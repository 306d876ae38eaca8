"""Instructions (or CPU time) per blocking ``SendMessage``, repeatable on a busy machine.

``valgrind --tool=callgrind --instr-atstart=no python -m benchmarks.instructions plain|ours
[-n 200] [-c 16] [--store URL] [--cluster]`` builds the app in-process (O or S, as
``benchmarks.serve`` does), drives its lifespan, sends warm-up requests, then turns callgrind's
instrumentation on for exactly the measured requests (``callgrind_control -i on|off``) and
prints one JSON line; valgrind's "Collected" line divided by *n* is instructions per request.
Without valgrind it prints CPU µs per request. Requests go straight into the ASGI app (no
socket, no uvicorn: the same for both systems), *c* at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import time
from typing import Any

from benchmarks.apps import build_app

_BODY = (
    '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":'
    '{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
)


async def _send(app: Any, i: int) -> None:
    body = (_BODY % (i, i)).encode()
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"a2a-version", b"1.0"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1", "method": "POST", "scheme": "http", "path": "/",
        "raw_path": b"/", "root_path": "", "query_string": b"", "headers": headers,
        "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5555),
    }  # fmt: skip
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    out: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        out.append(message)

    await app(scope, receive, send)
    answer = b"".join(m.get("body", b"") for m in out[1:])
    if out[0]["status"] != 200 or b'"error"' in answer or b"COMPLETED" not in answer:
        raise RuntimeError(f"unexpected answer {out[0]['status']} {answer[:300]!r}")


async def _requests(app: Any, n: int, c: int) -> None:
    numbers = iter(range(n))

    async def worker() -> None:
        for i in numbers:
            await _send(app, i)

    await asyncio.gather(*(worker() for _ in range(c)))


def _callgrind(state: str) -> None:
    """Turn callgrind's instrumentation of this process on or off (no-op without it)."""
    if "valgrind" not in os.environ.get("LD_PRELOAD", "") or not shutil.which("callgrind_control"):
        return
    proc = subprocess.Popen(
        ["callgrind_control", "-i", state, str(os.getpid())], stdout=subprocess.DEVNULL
    )
    while proc.poll() is None:  # busy: valgrind answers while the process runs
        sum(range(200))


async def measure(kind: str, store: str, cluster: bool, n: int, c: int, warmup: int) -> float:
    from asgi_lifespan import LifespanManager

    settings: dict[str, Any] = {}
    if kind == "ours":
        settings = {"process_tuning": True, **({"cluster": True} if cluster else {})}
    async with LifespanManager(build_app(kind, store, **settings)) as manager:
        await _requests(manager.app, warmup, c)
        _callgrind("on")
        start = time.process_time()
        await _requests(manager.app, n, c)
        cpu = time.process_time() - start
        _callgrind("off")
    return cpu / n * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("kind", choices=["plain", "ours"])
    parser.add_argument("-n", type=int, default=200, help="measured requests")
    parser.add_argument("-c", type=int, default=16, help="requests in flight")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--cluster", action="store_true")
    args = parser.parse_args(argv)
    cpu = asyncio.run(measure(args.kind, args.store, args.cluster, args.n, args.c, args.warmup))
    print(json.dumps({"kind": args.kind, "store": args.store, "n": args.n, "cpu_us": cpu}))


if __name__ == "__main__":
    main()
