"""Instructions (or CPU time) per blocking ``SendMessage``, repeatable on a busy machine.

``valgrind --tool=callgrind --instr-atstart=no python -m benchmarks.instructions KIND [-n 200]
[-c 16] [--store URL] [--cluster] [--stream]`` builds the app in-process (KIND ``ours`` is O,
``plain`` S; ``floor`` and ``floor-cached`` are F: S calling the module through apcore,
``benchmarks/apps.py``, as ``benchmarks.serve`` builds them), drives its lifespan, sends
warm-up requests, then turns callgrind's instrumentation on for exactly the measured requests
(``callgrind_control -i on|off``) and prints one JSON line; valgrind's "Collected" line
divided by *n* is instructions per request.
Without valgrind it prints CPU µs per request. Requests go straight into the ASGI app (no
socket, no uvicorn: the same for both systems), *c* at a time. ``--stream`` sends
``SendStreamingMessage`` instead (the whole stream counted). ``--uvloop`` runs both on
uvloop's event loop, as the ``speed`` extra serves them.

``valgrind --tool=callgrind --collect-atstart=no python -m benchmarks.instructions plain|ours
--first-event`` counts each stream only up to its first SSE event (one stream at a time):
collection is switched by callgrind client requests issued from this process
(:func:`_toggle_collect`, x86-64 only), so nothing between two streams is counted.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import mmap
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

from benchmarks.apps import build_app

_BODY = (
    '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":'
    '{"messageId":"m-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
)


async def _send(app: Any, i: int, method: str = "SendMessage", on_first: Any = None) -> None:
    body = (_BODY % (i, i)).replace("SendMessage", method).encode()
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
        nonlocal on_first
        if on_first is not None and message.get("body"):
            on_first()  # the first body chunk: a stream's first event
            on_first = None
        out.append(message)

    await app(scope, receive, send)
    answer = b"".join(m.get("body", b"") for m in out[1:])
    if out[0]["status"] != 200 or b'"error"' in answer or b"COMPLETED" not in answer:
        raise RuntimeError(f"unexpected answer {out[0]['status']} {answer[:300]!r}")


async def _requests(app: Any, n: int, c: int, method: str = "SendMessage") -> None:
    numbers = iter(range(n))

    async def worker() -> None:
        for i in numbers:
            await _send(app, i, method)

    await asyncio.gather(*(worker() for _ in range(c)))


async def _first_events(app: Any, n: int, toggle: Callable[[], None]) -> None:
    """*n* streams one after the other, collection on from each request until its first
    event (*toggle* switches it)."""
    for i in range(n):
        toggle()
        await _send(app, i, "SendStreamingMessage", on_first=toggle)


def _toggle_collect() -> Callable[[], None]:
    """A function that issues callgrind's ``CALLGRIND_TOGGLE_COLLECT`` client request (a no-op
    outside valgrind): the request's magic instruction sequence (valgrind.h, amd64) in an
    executable page, called through ctypes, since a subprocess (callgrind_control) cannot
    switch at an exact point."""
    if platform.machine() != "x86_64":
        raise SystemExit("--first-event needs x86-64 (callgrind client requests)")
    code = bytes.fromhex(
        "4889f8"  # mov rax, rdi: the request's arguments
        "31d2"  # xor edx, edx: its default result
        "48c1c703" "48c1c70d" "48c1c73d" "48c1c733"  # rol rdi, 3/13/61/51 (a no-op)
        "4887db"  # xchg rbx, rbx: the request
        "4889d0c3"  # mov rax, rdx; ret
    )  # fmt: skip
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    request = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p)(address)
    # VG_USERREQ_TOOL_BASE('C', 'T') + 2: CALLGRIND_TOGGLE_COLLECT
    args = (ctypes.c_ulong * 6)((ord("C") << 24 | ord("T") << 16) + 2)

    def toggle() -> None:
        request(ctypes.addressof(args))

    toggle.page = page  # type: ignore[attr-defined]  # keep the page mapped
    return toggle


def _callgrind(state: str) -> None:
    """Turn callgrind's instrumentation of this process on or off (no-op without it)."""
    if "valgrind" not in os.environ.get("LD_PRELOAD", "") or not shutil.which("callgrind_control"):
        return
    proc = subprocess.Popen(
        ["callgrind_control", "-i", state, str(os.getpid())], stdout=subprocess.DEVNULL
    )
    while proc.poll() is None:  # busy: valgrind answers while the process runs
        sum(range(200))


async def measure(
    kind: str, store: str, cluster: bool, n: int, c: int, warmup: int, mode: str = "send"
) -> float:
    from asgi_lifespan import LifespanManager

    settings: dict[str, Any] = {}
    if kind == "ours":
        settings = {"process_tuning": True, **({"cluster": True} if cluster else {})}
    method = "SendMessage" if mode == "send" else "SendStreamingMessage"
    async with LifespanManager(build_app(kind, store, **settings)) as manager:
        await _requests(manager.app, warmup, c, method)
        if mode == "first-event":
            toggle = _toggle_collect()
            start = time.process_time()
            await _first_events(manager.app, n, toggle)
            return (time.process_time() - start) / n * 1e6
        _callgrind("on")
        start = time.process_time()
        await _requests(manager.app, n, c, method)
        cpu = time.process_time() - start
        _callgrind("off")
    return cpu / n * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("kind", choices=["plain", "floor", "floor-cached", "ours"])
    parser.add_argument("-n", type=int, default=200, help="measured requests")
    parser.add_argument("-c", type=int, default=16, help="requests in flight")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--stream", action="store_true", help="SendStreamingMessage, whole")
    parser.add_argument(
        "--first-event", action="store_true", help="streams up to their first event, c=1"
    )
    parser.add_argument("--uvloop", action="store_true", help="uvloop's loop (the speed extra)")
    args = parser.parse_args(argv)
    mode = "first-event" if args.first_event else "stream" if args.stream else "send"
    loop_factory = None
    if args.uvloop:
        import uvloop

        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        cpu = runner.run(
            measure(args.kind, args.store, args.cluster, args.n, args.c, args.warmup, mode)
        )
    print(json.dumps({"kind": args.kind, "store": args.store, "n": args.n, "mode": mode,
                      "loop": "uvloop" if args.uvloop else "asyncio", "cpu_us": cpu}))  # fmt: skip


if __name__ == "__main__":
    main()
