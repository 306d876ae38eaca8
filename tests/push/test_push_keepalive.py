"""Push deliveries keep their connections alive per webhook name (``_egress.NamePools``).

Deliveries to one name share a connection; a connection is never used for another name,
even one on the same address, nor for the name once it resolves to another address (every
attempt still looks it up and checks it). A receiver that closed a kept connection as a
delivery went out on it (its idle timeout), before answering, gets the delivery once, on a
new connection, in the same attempt; a second such failure is not sent again.

The receiver is a bare HTTP/1.1 server (TLS or not) that notes the SNI of each connection,
how many are open, and each request it answers; the names resolve by the policy's resolver.
Deliveries go through :func:`try_once`, the attempt the sender makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apcore_a2a.push import PushUrlPolicy
from apcore_a2a.push.aimed import Webhooks
from apcore_a2a.push.attempt import Delivery, try_once
from apcore_a2a.push.signing import SigningKey
from tests._forward_proxy import without_proxies
from tests._kept_server import EMPTY_OK, KeptServer
from tests.bindings._grpc import self_signed_cert

KEY = SigningKey.generate()


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)


@contextlib.asynccontextmanager
async def hook(
    host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[KeptServer, int]]:
    server = KeptServer()
    if tls is not None:
        tls.sni_callback = server.sni
    listening = await asyncio.start_server(server.serve, host, port, ssl=tls)
    async with listening:
        yield server, listening.sockets[0].getsockname()[1]


def policy(table: dict[str, list[str]]) -> PushUrlPolicy:
    async def resolve(host: str, _port: int) -> list[str]:
        return table[host]

    return PushUrlPolicy(allow_insecure=True, resolver=resolve)


async def deliver(
    webhooks: Webhooks, checks: PushUrlPolicy, url: str, n: int, seconds: float = 5
) -> str | None:
    delivery = Delivery("t-1", "c-1", url, {}, b'{"n": %d}' % n, "http://agent")
    return await try_once(delivery, checks, webhooks, KEY, seconds)


async def test_https_deliveries_to_one_name_share_a_connection_and_not_another_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, each delivery made a connection and a TLS handshake of its own. Two names
    on one address each have theirs (their own SNI and certificate check)."""
    cert, key = self_signed_cert(tmp_path, "a.test", "b.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    webhooks = Webhooks(timeout=5)
    checks = policy({"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]})
    async with hook(tls=tls) as (server, port):
        for n, name in enumerate(["a.test", "a.test", "b.test", "a.test", "b.test"]):
            assert await deliver(webhooks, checks, f"https://{name}:{port}/", n) is None
        assert server.names == ["a.test", "b.test"]
        assert server.open == 2, "kept alive between the deliveries"
        assert len(server.answered) == 5
        await webhooks.aclose()


async def test_a_rebinding_name_never_reuses_the_connection_checked_for_its_old_address() -> None:
    """Every attempt looks the name up again: resolved elsewhere (127.0.0.2), the delivery
    goes there, not on the connection kept to 127.0.0.1; resolved to a refused address
    (the metadata service), nothing is sent at all, kept connection or not."""
    table = {"hook.test": ["127.0.0.1"]}
    webhooks, checks = Webhooks(timeout=5), policy(table)
    async with hook() as (first, port), hook("127.0.0.2", port) as (second, _):
        url = f"http://hook.test:{port}/"
        assert await deliver(webhooks, checks, url, 0) is None
        table["hook.test"] = ["127.0.0.2"]
        assert await deliver(webhooks, checks, url, 1) is None
        table["hook.test"] = ["169.254.169.254"]
        with pytest.raises(Exception, match="URL refused at delivery"):
            await deliver(webhooks, checks, url, 2)
        table["hook.test"] = ["127.0.0.1"]
        assert await deliver(webhooks, checks, url, 3) is None
        assert (first.answered, second.answered) == ([b'{"n": 0}', b'{"n": 3}'], [b'{"n": 1}'])
        assert (first.connections, second.connections) == (1, 1)
        await webhooks.aclose()


async def test_a_delivery_meeting_the_receivers_idle_close_is_sent_once_more() -> None:
    """The receiver closes its kept connection as the next delivery arrives on it: the
    attempt sends it again at once on a new connection, delivered once. Without the replay,
    the attempt failed (a retry 1 s later, or the config failed with no retries left)."""
    webhooks, checks = Webhooks(timeout=5), policy({"hook.test": ["127.0.0.1"]})
    async with hook() as (server, port):
        server.drop = True
        url = f"http://hook.test:{port}/"
        for n in range(3):
            assert await deliver(webhooks, checks, url, n) is None
        assert server.answered == [b'{"n": 0}', b'{"n": 1}', b'{"n": 2}']
        assert (server.dropped, server.connections) == (2, 3)
        await webhooks.aclose()


async def test_a_delivery_is_sent_again_once_at_most() -> None:
    """A receiver that closes every connection unanswered after its first delivery: the
    second delivery goes out on the kept connection, then once on a new one, which fails
    too (a connection made for it): the attempt fails, and the sender's retries decide."""
    webhooks, checks = Webhooks(timeout=5), policy({"hook.test": ["127.0.0.1"]})
    async with hook() as (server, port):
        server.answers = 1
        url = f"http://hook.test:{port}/"
        assert await deliver(webhooks, checks, url, 0) is None
        problem = await deliver(webhooks, checks, url, 1)
        assert problem is not None and problem.startswith("connection error")
        assert (len(server.answered), server.dropped, server.connections) == (1, 2, 2)
        await webhooks.aclose()


async def test_a_delivery_failing_on_a_connection_made_for_it_is_not_sent_again() -> None:
    """The receiver may have taken it before it closed: the sender's retries decide."""
    webhooks, checks = Webhooks(timeout=5), policy({"hook.test": ["127.0.0.1"]})
    async with hook() as (server, port):
        server.answers = 0
        problem = await deliver(webhooks, checks, f"http://hook.test:{port}/", 0)
        assert problem is not None and problem.startswith("connection error")
        assert (server.dropped, server.connections) == (1, 1)
        await webhooks.aclose()


async def test_a_delivery_whose_receiver_began_an_answer_then_closed_is_not_sent_again() -> None:
    """The receiver read the second delivery on its kept connection, wrote half a status
    line and closed: it took the delivery (it may have processed it), so the attempt fails
    and the sender's retries decide; it is not sent again at once. httpcore raises the same
    error as for a connection closed unanswered (``upstream/received_bytes.py``): the
    delivery was sent twice."""
    received: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = int(head.partition("content-length:")[2].split("\r\n")[0] or 0)
                received.append(await reader.readexactly(length))
                if len(received) > 1:
                    writer.write(b"HTTP/1.1 20")  # half a status line, then the close
                    await writer.drain()
                    return
                writer.write(EMPTY_OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    webhooks, checks = Webhooks(timeout=5), policy({"hook.test": ["127.0.0.1"]})
    listening = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with listening:
        url = f"http://hook.test:{listening.sockets[0].getsockname()[1]}/"
        assert await deliver(webhooks, checks, url, 0) is None
        problem = await deliver(webhooks, checks, url, 1)
        assert problem is not None
        assert received == [b'{"n": 0}', b'{"n": 1}']
        await webhooks.aclose()


async def test_a_callers_stalled_deliveries_to_a_name_leave_its_connections_to_others() -> None:
    """One caller's receiver at a name holds the deliveries it is sent (up to its share of
    ``push_max_deliveries``, half of them: 100 with 200 configured); another caller's delivery to
    the same name is delivered meanwhile. The name's connections were capped at 100 (the
    client's bound): that delivery waited for one until the stalled ones' attempts ran out
    of time."""
    release = asyncio.Event()
    held, answered = [], []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = int(head.partition("content-length:")[2].split("\r\n")[0] or 0)
                await reader.readexactly(length)
                if head.startswith("post /stalled"):
                    held.append(head)
                    await release.wait()
                else:
                    answered.append(head)
                writer.write(EMPTY_OK)
                await writer.drain()
        writer.close()

    # Times no stall of a loaded machine reaches: only the held receiver ends the attempts.
    webhooks, checks = Webhooks(timeout=60), policy({"hook.test": ["127.0.0.1"]})
    listening = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=256)
    async with listening:
        base = f"http://hook.test:{listening.sockets[0].getsockname()[1]}"
        stalled = [
            asyncio.create_task(deliver(webhooks, checks, f"{base}/stalled", n, 60))
            for n in range(100)
        ]
        async with asyncio.timeout(10):  # the test's own guard
            while len(held) < 100:
                await asyncio.sleep(0.01)
        async with asyncio.timeout(20):  # the test's own guard: it waited for a connection
            assert await deliver(webhooks, checks, f"{base}/other", 0, 60) is None
        assert (len(answered), sum(t.done() for t in stalled)) == (1, 0)  # those still held
        release.set()
        assert await asyncio.gather(*stalled) == [None] * 100
        await webhooks.aclose()
