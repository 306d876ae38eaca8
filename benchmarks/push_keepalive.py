"""Push deliveries per second and the sender's CPU per delivery, a connection for each
delivery (before: the old ``Webhooks``, httpx with no keep-alive) or kept alive per
webhook name (now, ``_egress.NamePools``), to an https and an http webhook (uvicorn on
127.0.0.1 in a thread of its own, so the sender's thread's CPU is the sender's alone).

Each delivery is the attempt the sender makes (``push/attempt.py``: the URL checked by
the SSRF policy, a resolver answering ``127.0.0.1`` at once, the JWT signed, the POST,
the answer read), one after another, as one config's worker sends them.

``python -m benchmarks.push_keepalive``: per case, deliveries per second and CPU
milliseconds per delivery (``time.thread_time``) over 300 deliveries, after 20 not
counted; before and after alternate in the same run.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import httpx

from apcore_a2a._egress import to_first
from apcore_a2a.push import PushUrlPolicy
from apcore_a2a.push.aimed import Webhooks
from apcore_a2a.push.attempt import Delivery, try_once
from apcore_a2a.push.policy import Checked
from apcore_a2a.push.signing import SigningKey
from tests._support import threaded_server
from tests.bindings._grpc import self_signed_cert

CALLS, WARM = 300, 20
KEY = SigningKey.generate()


async def _ok(scope: dict[str, object], receive: object, send: object) -> None:
    if scope["type"] != "http":
        return
    while (await receive())["more_body"]:  # type: ignore[operator]
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]


async def _fixed(_host: str, _port: int) -> list[str]:
    return ["127.0.0.1"]


class OneUse:
    """The sender's POST as it was: a connection for each delivery."""

    def __init__(self, timeout: float) -> None:
        self._client = httpx.AsyncClient(
            verify=httpx.create_ssl_context(),
            timeout=timeout,
            limits=httpx.Limits(max_keepalive_connections=0),
            trust_env=False,
        )

    async def post(
        self,
        url: str,
        checked: Checked,
        *,
        content: bytes,
        headers: Mapping[str, str],
        deadline: float | None = None,
    ) -> httpx.Response:
        sent = self._client.build_request("POST", url, content=content, headers=headers)
        send = partial(self._client.send, stream=True)
        return await to_first(send, sent, checked.addresses, deadline)

    async def aclose(self) -> None:
        await self._client.aclose()


async def _run(webhooks: Webhooks | OneUse, url: str) -> tuple[float, float]:
    """Deliveries per second, and the sender's CPU ms per delivery."""
    policy = PushUrlPolicy(allow_insecure=True, resolver=_fixed)
    body = b'{"statusUpdate": {"taskId": "t-1", "status": {"state": "TASK_STATE_WORKING"}}}'
    delivery = Delivery("t-1", "c-1", url, {"Content-Type": "application/json"}, body, "x")
    for _ in range(WARM):
        assert await try_once(delivery, policy, webhooks, KEY, 10) is None  # type: ignore[arg-type]
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(CALLS):
        assert await try_once(delivery, policy, webhooks, KEY, 10) is None  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    await webhooks.aclose()
    return CALLS / wall, cpu / CALLS * 1000


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        cert, key = self_signed_cert(Path(folder), "hook.test")
        os.environ["SSL_CERT_FILE"] = str(cert)  # both senders trust the test's CA
        tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
        with threaded_server(_ok, **tls) as https, threaded_server(_ok) as http:
            for scheme, base in (("https", https), ("http", http)):
                port = httpx.URL(base).port
                url = f"{scheme}://hook.test:{port}/hook"
                before = await _run(OneUse(10), url)
                after = await _run(Webhooks(10), url)
                print(
                    f"{scheme}: {before[0]:.0f} -> {after[0]:.0f} deliveries/s "
                    f"({after[0] / before[0]:.2f}x), CPU {before[1]:.2f} -> {after[1]:.2f} ms "
                    f"per delivery ({before[1] / after[1]:.2f}x less)"
                )


if __name__ == "__main__":
    asyncio.run(main())
