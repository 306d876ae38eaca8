"""Wall time of one request to a name's checked addresses (``_egress.to_first``, here
through a push delivery's POST) with a connect timeout of 2 s:

- ``slow+N``: the first address slow (127.0.0.2 with its accept queue full: the first SYN
  is dropped; the queue is drained 0.3 s later and the request served there), then N that
  refuse at once;
- ``dead+N``: the first address never takes the connection, then N that refuse;
- ``refused*200+good``: 200 refusing addresses, then the listening one.

``python -m benchmarks.egress_addresses``: one line per case, its outcome and seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator

import uvicorn

from apcore_a2a.push.aimed import Webhooks
from apcore_a2a.push.policy import Checked

SLOW = "127.0.0.2"


async def _ok(scope: dict[str, object], receive: object, send: object) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 204, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]


@contextlib.contextmanager
def _full_queue(port: int) -> Iterator[socket.socket]:
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the last case's
        listener.bind((SLOW, port))
        listener.listen(0)
        for _ in range(4):
            filler = stack.enter_context(socket.socket())
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect((SLOW, port))
        yield listener


def _server(**where: object) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(_ok, log_level="error", lifespan="off", **where))  # type: ignore[arg-type]


async def _case(port: int, addresses: list[str], drain_after: float | None) -> str:
    webhooks = Webhooks(timeout=2)
    with _full_queue(port) as listener:
        slow = _server()
        serving = None
        if drain_after is not None:

            async def later() -> None:
                await asyncio.sleep(drain_after)
                await slow.serve(sockets=[listener])

            serving = asyncio.create_task(later())
        started = time.monotonic()
        try:
            answer = await webhooks.post(
                f"http://hook.test:{port}/", Checked(None, addresses), content=b"{}", headers={}
            )
            await answer.aclose()
            outcome = f"HTTP {answer.status_code}"
        except Exception as exc:
            outcome = type(exc).__name__
        took = time.monotonic() - started
        slow.should_exit = True
        if serving is not None:
            if not slow.started:
                serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
    await webhooks.aclose()
    return f"{outcome} in {took:.2f} s"


async def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    good = _server(host="127.0.0.1", port=port)
    task = asyncio.create_task(good.serve())
    while not good.started:
        await asyncio.sleep(0.01)
    refusing = [f"127.0.{i // 250}.{3 + i % 250}" for i in range(200)]
    for n in (1, 3, 7):
        print(f"slow+{n}:", await _case(port, [SLOW, *refusing[:n]], 0.3))
        print(f"dead+{n}:", await _case(port, [SLOW, *refusing[:n]], None))
    print("refused*200+good:", await _case(port, [*refusing, "127.0.0.1"], None))
    good.should_exit = True
    await task


if __name__ == "__main__":
    asyncio.run(main())
