"""Large HTTP request heads: what the agent answers and what they cost it, per protocol.

Run: ``.venv/bin/python -m benchmarks.head_size [--cases 1mb-header,64mb-header]``.
For each case and each of uvicorn's HTTP protocols (httptools, h11: httptools hidden as
without the ``speed`` extra) it serves the ops agent with ``serve()`` in a fresh child
process, opens one raw connection that sends the case's request head, and prints what the
server answered (status line, or how the connection ended), how many bytes it took before
that, the child's peak RSS growth (``VmHWM`` after minus ``VmRSS`` before) and whether
another connection's ``GET /health``, sent once half the head is out, was served.

Cases: ``1mb-header`` / ``64mb-header`` (one header value of that size), ``many-8k``
(1,000 headers of 8 KB), ``1mb-url`` (a request line with a 1 MB query), ``8k-auth`` (one
8 KB ``Authorization`` header: a big JWT, to be served).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests._support import without_packages
from tests.ops._proc import serve_process

_MB = 1024 * 1024
_CHUNK = 64 * 1024
_START = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _header(name: bytes, size: int) -> Iterator[bytes]:
    yield name + b": "
    for _ in range(size // _CHUNK):
        yield b"a" * _CHUNK
    yield b"a" * (size % _CHUNK) + b"\r\n"


def _head(case: str) -> Iterator[bytes]:
    """The request head of *case*, in pieces of at most 64 KiB."""
    if case == "1mb-url":
        yield b"GET /health?q="
        yield from (b"a" * _CHUNK for _ in range(_MB // _CHUNK))
        yield b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        return
    yield _START
    if case in ("1mb-header", "64mb-header"):
        yield from _header(b"X-Big", (1 if case == "1mb-header" else 64) * _MB)
    elif case == "many-8k":
        for i in range(1000):
            yield from _header(b"X-H%d" % i, 8 * 1024)
    elif case == "8k-auth":
        yield from _header(b"Authorization", 8 * 1024)
    yield b"\r\n"


def _status(pid: int, key: str) -> int:
    """The KiB of *key* (``VmRSS``, ``VmHWM``) of process *pid*."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} for pid {pid}")


async def _send(port: int, case: str, half: asyncio.Event) -> tuple[str, int]:
    """(how the server answered, bytes written before it did); *half* is set once half the
    head is written."""
    total = sum(map(len, _head(case)))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.ensure_future(reader.read(200))
    sent = 0
    try:
        with contextlib.suppress(ConnectionError):  # the server refused before reading all
            for piece in _head(case):
                if answer.done():
                    break
                writer.write(piece)
                await writer.drain()
                sent += len(piece)
                if sent * 2 >= total:
                    half.set()
        try:
            first = await asyncio.wait_for(answer, 60)
            line = first.split(b"\r\n", 1)[0].decode(errors="replace") or "closed, no answer"
        except ConnectionError:  # its close met bytes it had not read: the answer is lost
            line = "reset, no answer read"
        except TimeoutError:
            line = "no answer in 60 s"
    finally:
        half.set()
        answer.cancel()
        writer.close()
    return line, sent


async def _good(url: str, half: asyncio.Event) -> str:
    await half.wait()
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            return str((await http.get(url + "/health")).status_code)
    except httpx.HTTPError as exc:
        return f"failed {type(exc).__name__}"


async def measure(case: str, http: str) -> str:
    """One table row: *case* against a fresh agent serving with *http*."""
    with contextlib.ExitStack() as stack:
        env = None
        if http == "h11":
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            env = without_packages(folder, "httptools")
        url, proc = stack.enter_context(serve_process(env))
        before = _status(proc.pid, "VmRSS")
        half = asyncio.Event()
        (line, sent), good = await asyncio.gather(
            _send(int(url.rsplit(":", 1)[1]), case, half), _good(url, half)
        )
        peak = _status(proc.pid, "VmHWM")
    return (
        f"| {case} | {http} | {line} | {sent:,} | {before / 1024:.0f} | "
        f"{max(peak - before, 0) / 1024:.1f} | {good} |"
    )


async def main(cases: list[str]) -> None:
    print(
        "| case | protocol | answer | bytes sent | RSS before MiB | peak growth MiB | other GET |"
    )
    print("|---|---|---|---:|---:|---:|---|")
    for case in cases:
        for http in ("httptools", "h11"):
            print(await measure(case, http), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases", default="8k-auth,1mb-header,64mb-header,many-8k,1mb-url", help="comma-separated"
    )
    asyncio.run(main(parser.parse_args().cases.split(",")))
