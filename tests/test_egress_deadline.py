"""One deadline for a name's lookup and its connection, the addresses sharing what is left
(``_egress.to_first``), and at most 8 of a name's addresses tried, every
one of them checked.

A *slow* address is 127.0.0.2 with its accept queue full (the kernel drops the first SYN;
the client sends its next one a second later), served once the queue is drained: it takes
a connection, later than its share of the timeout. 127.0.0.3 and up refuse at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.server.routes import create_agent_card_routes
from starlette.applications import Starlette

from apcore_a2a._egress import lookup
from apcore_a2a.client import A2AClient, A2AConnectionError, CrossOriginEndpointError
from apcore_a2a.push import PushUrlPolicy
from apcore_a2a.push.aimed import Webhooks
from apcore_a2a.push.attempt import Delivery, try_once
from apcore_a2a.push.policy import Checked
from apcore_a2a.push.signing import SigningKey
from tests._forward_proxy import without_proxies
from tests._support import free_port, running_server
from tests.client._sdk_agent import agent_card
from tests.client._stub_agent import StubAgent
from tests.client.test_hostile_grpc_agent import _grpc_agent
from tests.client.test_origin_names import _card_naming
from tests.test_egress_addresses import BLACKHOLE, answers, blackhole

#: As many refusing addresses as are tried (``MAX_ADDRESSES``, documented).
REFUSING = [f"127.0.0.{i}" for i in range(3, 3 + 8)]


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)


@contextlib.asynccontextmanager
async def slow(
    app: Any, port: int, drain: asyncio.Event | None = None
) -> AsyncIterator[asyncio.Event]:
    """127.0.0.2:*port* taking no connection until *drain* (yielded) is set, then serving
    *app* (uvicorn drains the queue)."""
    drain = drain or asyncio.Event()
    with blackhole(port) as listener:

        async def serve() -> None:
            await drain.wait()
            await server.serve(sockets=[listener])

        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        task = asyncio.create_task(serve())
        try:
            yield drain
        finally:
            server.should_exit = True
            if not drain.is_set():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def drained_after(drain: asyncio.Event, seconds: float) -> None:
    asyncio.get_running_loop().call_later(seconds, drain.set)


async def test_a_slow_first_address_still_connects_when_the_others_refuse() -> None:
    """Its share (a quarter of 2 s) runs out before the SYN is sent again; the three
    others refuse at once: it is tried again with what they left. Before, the call failed."""
    async with _card_naming("dual.test") as (url, elsewhere, _names, port):
        resolve = answers(BLACKHOLE, *REFUSING[:3])
        async with (
            slow(elsewhere, port) as drain,
            A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=2) as c,
        ):
            drained_after(drain, 0.3)
            assert (await c.get_task("t-1"))["status"]["state"] == "completed"
    [seen] = elsewhere.seen
    assert seen.headers["host"] == f"dual.test:{port}"


async def test_the_lookup_and_the_connection_share_one_connect_timeout() -> None:
    """The lookup takes 3 of the 4 s, and the slow address takes connections only after
    the 4 s have passed (its queue drained 4.3 s after the lookup began, the deadline set
    before it), in time for a connection given 4 s of its own: its SYN sent again 3 s
    after the first reaches it. One deadline for both: the call times out, unseen, however
    slow the machine. Before, the connection had 4 s of its own and reached the agent
    after about 6 s. (A stream: the client's timeout bounds each wait, not the whole
    call.)"""
    async with _card_naming("late.test") as (url, elsewhere, _names, port):
        drain = asyncio.Event()

        async def resolve(host: str, port: int) -> Sequence[str]:
            drained_after(drain, 4.3)
            await asyncio.sleep(3)
            return [BLACKHOLE]

        async def first_event() -> None:
            async for _event in c.resubscribe("t-1", max_retries=0):
                break

        async with (
            slow(elsewhere, port, drain),
            A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=4) as c,
        ):
            with pytest.raises(A2AConnectionError, match="timed out"):
                await first_event()
    assert elsewhere.seen == []


async def test_a_name_with_many_addresses_is_tried_at_its_first_few() -> None:
    """The listening address comes after MAX_ADDRESSES refusing ones: never tried."""
    async with _card_naming("many.test") as (url, elsewhere, _names, _port):
        resolve = answers(*REFUSING, "127.0.0.1")
        async with A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=4) as c:
            with pytest.raises(A2AConnectionError):
                await c.get_task("t-1")
    assert elsewhere.seen == []


async def test_every_address_of_a_name_is_checked_however_many() -> None:
    async with _card_naming("many.test") as (url, elsewhere, _names, _port):
        resolve = answers(*(f"127.0.{i}.1" for i in range(100)), "169.254.169.254")
        async with A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=4) as c:
            with pytest.raises(CrossOriginEndpointError, match=r"169\.254\.169\.254"):
                await c.get_task("t-1")
    assert elsewhere.seen == []


async def test_a_push_delivery_tries_the_first_few_addresses() -> None:
    receiver = StubAgent()
    port = free_port()
    webhooks = Webhooks(timeout=4)
    async with running_server(receiver, port=port):
        checked = Checked(None, [*REFUSING, "127.0.0.1"])
        with pytest.raises(httpx.ConnectError):
            await webhooks.post(f"http://hook.test:{port}/", checked, content=b"{}", headers={})
    await webhooks.aclose()
    assert receiver.seen == []


async def test_a_grpc_host_is_dialled_at_its_first_few_addresses() -> None:
    port = free_port()
    async with _grpc_agent(f"127.0.0.1:{port}") as (_url, hostile):
        card = agent_card(f"many.test:{port}", versions=("1.0",), binding="GRPC")
        app = Starlette(routes=create_agent_card_routes(card))
        resolve = answers(*REFUSING, "127.0.0.1")
        async with (
            running_server(app) as url,
            A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=10) as client,
        ):
            with pytest.raises(A2AConnectionError):
                await client.send_message("hi")
    assert hostile.metadata == []


async def test_a_link_local_answer_keeps_its_zone() -> None:
    """Without its zone a link-local address cannot be dialled (EINVAL)."""
    assert [str(a) for a in await lookup(answers("fe80::1%lo"), "ll.test", 80, None)] == [
        "fe80::1%lo"
    ]


async def test_a_push_attempts_addresses_share_what_its_lookup_left() -> None:
    """The webhook name takes 1.2 of the attempt's 2 s to resolve: the dead first address
    gets half of the 0.8 s left, then the receiver's. Before, the first had half of a fresh
    2 s, past the attempt's end, and the attempt failed."""

    async def resolve(host: str, port: int) -> Sequence[str]:
        await asyncio.sleep(1.2)
        return [BLACKHOLE, "127.0.0.1"]

    receiver, port = StubAgent(), free_port()
    policy, webhooks = PushUrlPolicy(allow_insecure=True, resolver=resolve), Webhooks(timeout=2)
    delivery = Delivery("t-1", "c-1", f"http://hook.test:{port}/", {}, b"{}", "http://agent")
    async with running_server(receiver, port=port):
        with blackhole(port):
            assert await try_once(delivery, policy, webhooks, SigningKey.generate(), 2) is None
    await webhooks.aclose()
    [seen] = receiver.seen
    assert seen.headers["host"] == f"hook.test:{port}"


async def test_one_address_spelt_many_ways_is_tried_once() -> None:
    """Eight spellings of ::1 (nothing listens there) do not use up the addresses tried."""
    spellings = ["::1", "0::1", "0:0::1", "0:0:0::1", "0:0:0:0::1", "::0:1", "::0:0:1", "::00:1"]
    async with _card_naming("spelt.test") as (url, elsewhere, _names, _port):
        resolve = answers(*spellings, "127.0.0.1")
        async with A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=4) as c:
            assert (await c.get_task("t-1"))["status"]["state"] == "completed"
    assert len(elsewhere.seen) == 1


@pytest.mark.parametrize("answer", ["fd00:ec2::254%eth0", "fd00:ec2::254%1"])
async def test_a_zone_does_not_hide_the_metadata_address(answer: str) -> None:
    """A zone counts on a link-local address only: on AWS's IPv6 metadata address it made
    the address compare unequal to it, a private one that was followed."""
    async with (
        _card_naming("zoned.test") as (url, elsewhere, _names, _port),
        A2AClient(url, allow_other_origins=True, resolver=answers(answer), timeout=4) as client,
    ):
        with pytest.raises(CrossOriginEndpointError, match=r"link-local address \(fd00:ec2::254\)"):
            await client.get_task("t-1")
    assert elsewhere.seen == []
