"""Time per request to another origin's name through ``_egress.CheckedAddresses`` (the
client's calls with ``allow_other_origins=True``, the JWKS fetch), a connection for each
request (``ONE_USE``, as before) or kept alive per name (now), over TLS and plain HTTP, to
uvicorn on 127.0.0.1:

- ``fixed``: a resolver answering ``127.0.0.1`` at once (the lookup costs nothing);
- ``system``: the name ``localhost`` looked up by ``getaddrinfo`` on a thread at each
  request, as the default resolver does (what a lookup costs beside the connection);
- ``two names``: ``a.test`` and ``b.test`` in turn, both on 127.0.0.1 (a pool each).

``python -m benchmarks.origin_keepalive``: one line per case, mean milliseconds per
request over 300 sequential requests, after 20 not counted.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from pathlib import Path

import httpx
import uvicorn

from apcore_a2a._egress import CheckedAddresses, system_lookup
from tests._support import free_port
from tests.bindings._grpc import self_signed_cert

CALLS, WARM = 300, 20
#: A connection for each request (as before keep-alive).
ONE_USE = httpx.Limits(max_keepalive_connections=0)


async def _ok(scope: dict[str, object], receive: object, send: object) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]


async def _fixed(_host: str, _port: int) -> list[str]:
    return ["127.0.0.1"]


async def _per_call(transport: CheckedAddresses, urls: list[str]) -> float:
    async with httpx.AsyncClient(transport=transport, timeout=10) as http:
        names = itertools.cycle(urls)
        for _ in range(WARM):
            (await http.get(next(names))).raise_for_status()
        started = time.perf_counter()
        for _ in range(CALLS):
            (await http.get(next(names))).raise_for_status()
        return (time.perf_counter() - started) / CALLS * 1000


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        cert, key = self_signed_cert(Path(folder), "a.test", "b.test")
        verify = httpx.create_ssl_context(verify=str(cert))
        ports = {"https": free_port(), "http": free_port()}
        servers = [
            uvicorn.Server(
                uvicorn.Config(
                    _ok,
                    host="127.0.0.1",
                    port=ports["https"],
                    log_level="error",
                    lifespan="off",
                    ssl_certfile=str(cert),
                    ssl_keyfile=str(key),
                )
            ),
            uvicorn.Server(
                uvicorn.Config(
                    _ok, host="127.0.0.1", port=ports["http"], log_level="error", lifespan="off"
                )
            ),
        ]
        tasks = [asyncio.create_task(s.serve()) for s in servers]
        while not all(s.started for s in servers):
            await asyncio.sleep(0.01)
        for scheme, port in ports.items():
            cases = {
                "fixed": (_fixed, [f"{scheme}://a.test:{port}/"]),
                "system": (system_lookup, [f"{scheme}://localhost:{port}/"]),
                "two names": (_fixed, [f"{scheme}://{n}.test:{port}/" for n in "ab"]),
            }
            for case, (resolve, urls) in cases.items():
                one_use = httpx.AsyncHTTPTransport(verify=verify, limits=ONE_USE)
                before = await _per_call(CheckedAddresses(resolve, {}, verify, one_use), urls)
                after = await _per_call(CheckedAddresses(resolve, {}, verify), urls)
                print(
                    f"{scheme} {case}: one use {before:.2f} ms, kept alive {after:.2f} ms,"
                    f" {before / after:.2f}x"
                )
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main())
