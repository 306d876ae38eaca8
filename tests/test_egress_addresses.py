"""A name's checked addresses as every egress path tries them (``_egress.to_first``): the
client's calls to another origin, the JWKS fetch and push deliveries.

The name resolves (through the ``resolver=`` hook) to a blackhole first, 127.0.0.2 with
a listening socket whose accept queue is full, so the kernel drops every new SYN and the
connection times out (deterministic here; 10.255.255.1 answers on this machine), then to
127.0.0.1, where the real server listens on the same port. And a custom resolver's bad
answer or own failure ends as the path's typed error.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence

import pytest
from a2a.server.routes import create_agent_card_routes
from starlette.applications import Starlette

from apcore_a2a._egress import Resolver
from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError
from apcore_a2a.client import A2AClient, A2AConnectionError
from apcore_a2a.push import PushUrlPolicy
from apcore_a2a.push.aimed import Webhooks
from apcore_a2a.push.policy import Checked
from tests._forward_proxy import without_proxies
from tests._support import free_port, running_server
from tests.auth.test_jwks_redirects import Idp
from tests.client._sdk_agent import agent_card
from tests.client._stub_agent import StubAgent
from tests.client.test_origin_names import _card_naming

BLACKHOLE = "127.0.0.2"


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)


@contextlib.contextmanager
def blackhole(port: int) -> Iterator[socket.socket]:
    """127.0.0.2:*port* accepts no connection and refuses none: its queue is full."""
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        listener.bind((BLACKHOLE, port))
        listener.listen(0)
        for _ in range(4):  # fill the accept queue (and the SYN queue past it)
            filler = stack.enter_context(socket.socket())
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect((BLACKHOLE, port))
        yield listener


def answers(*addresses: object) -> Resolver:
    async def resolve(host: str, port: int) -> Sequence[str]:
        return list(addresses)  # type: ignore[return-value]  # as a custom resolver may

    return resolve


async def nothing(host: str, port: int) -> Sequence[str]:
    return None  # type: ignore[return-value]  # as a custom resolver may


async def failing(host: str, port: int) -> Sequence[str]:
    raise RuntimeError("resolver bug")


async def test_the_client_reaches_the_second_address_when_the_first_drops_packets() -> None:
    async with _card_naming("dual.test") as (url, elsewhere, _names, port):
        with blackhole(port):
            resolve = answers(BLACKHOLE, "127.0.0.1")
            async with A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=4) as c:
                assert (await c.get_task("t-1"))["status"]["state"] == "completed"
    [seen] = elsewhere.seen
    assert seen.headers["host"] == f"dual.test:{port}"


async def test_the_jwks_fetch_reaches_the_second_address_when_the_first_drops_packets() -> None:
    idp = Idp()
    port = free_port()
    async with running_server(idp.app(), port=port):
        with blackhole(port):
            resolve = answers(BLACKHOLE, "127.0.0.1")
            source = JWKSKeySource(f"http://idp.test:{port}/jwks.json", resolver=resolve, timeout=4)
            assert (await source.get("real", "RS256")) is not None
    assert idp.hosts == [f"idp.test:{port}"]


async def test_a_push_delivery_reaches_the_second_address_when_the_first_drops_packets() -> None:
    receiver = StubAgent()
    port = free_port()
    webhooks = Webhooks(timeout=4)
    async with running_server(receiver, port=port):
        with blackhole(port):
            checked = Checked(None, [BLACKHOLE, "127.0.0.1"])
            answer = await webhooks.post(
                f"http://hook.test:{port}/rpc", checked, content=b"{}", headers={}
            )
            await answer.aclose()
    await webhooks.aclose()
    [seen] = receiver.seen
    assert seen.headers["host"] == f"hook.test:{port}"


@pytest.mark.parametrize(
    ("resolve", "message"),
    [
        (answers("not-an-ip"), r"'odd.test' resolved to an unusable address \(not-an-ip\)"),
        (answers("::1%x]:1@evil.test"), r"resolved to an unusable address \(::1%x\]"),
        (failing, r"'odd.test' could not be resolved \(RuntimeError\)"),
        (nothing, "'odd.test' could not be resolved"),
        # quoted cut short, escaped: a resolver's answer is no one's to print whole
        (answers("x" * 100_000 + "\x1b"), r"address \(x{64}… \(100001 characters\)\)$"),
    ],
)
async def test_a_custom_resolvers_bad_answer_is_a_connection_error(
    resolve: Resolver, message: str
) -> None:
    async with (
        _card_naming("odd.test") as (url, elsewhere, _names, _port),
        A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=4) as client,
    ):
        with pytest.raises(A2AConnectionError, match=message):
            await client.get_task("t-1")
    assert elsewhere.seen == []


@pytest.mark.parametrize("resolve", [answers("not-an-ip"), failing])
async def test_a_custom_resolvers_bad_answer_fails_the_jwks_fetch(resolve: Resolver) -> None:
    source = JWKSKeySource("http://idp.test/jwks.json", resolver=resolve, timeout=4)
    with pytest.raises(KeyLookupError):
        await source.get("real", "RS256")


@pytest.mark.parametrize(
    ("resolve", "reason"),
    [
        (failing, "could not be resolved (RuntimeError)"),
        (nothing, "could not be resolved"),
        (answers(None), "resolved to an unusable address (None)"),
        (answers("8.8.8.8", b"1.1.1.1"), "resolved to an unusable address (b'1.1.1.1')"),
    ],
)
async def test_a_custom_resolvers_bad_answer_refuses_the_push_url(
    resolve: Resolver, reason: str
) -> None:
    policy = PushUrlPolicy(resolver=resolve)
    assert await policy.check("https://hook.example.com/") == f"host 'hook.example.com' {reason}"


@pytest.mark.parametrize("resolve", [answers("not-an-ip"), failing, nothing, answers()])
async def test_a_custom_resolvers_bad_answer_for_a_grpc_host_is_a_connection_error(
    resolve: Resolver,
) -> None:
    card = agent_card(f"odd.test:{free_port()}", versions=("1.0",), binding="GRPC")
    app = Starlette(routes=create_agent_card_routes(card))
    async with (
        running_server(app) as url,
        A2AClient(url, allow_other_origins=True, resolver=resolve, timeout=4) as client,
    ):
        with pytest.raises(
            A2AConnectionError,
            match=r"the gRPC host: 'odd\.test' (could not be resolved|resolved to an unusable)",
        ):
            await client.send_message("hi")
