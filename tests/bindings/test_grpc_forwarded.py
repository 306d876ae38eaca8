"""Anonymous gRPC callers behind a trusted proxy are told apart by ``x-forwarded-for``.

Anonymous callers are counted by address (``ip:<address>``). Over gRPC the address was
the peer's only: behind an L7 proxy every anonymous caller shared one quota key, so one
caller holding its ``max_unfinished_tasks_per_caller`` refused all the others. The same
``forwarded_allow_ips`` that HTTP trusts names the proxies whose ``x-forwarded-for``
metadata is read, by uvicorn's rule (the right-most address that is not a trusted proxy);
from any other peer the metadata is ignored.

Each caller is the official a2a-sdk gRPC client (1.0 and 0.3), its ``x-forwarded-for``
sent as a service parameter (gRPC metadata); its task waits at a gate, so it stays
unfinished and keeps its quota slot until the test releases it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.client import A2ACardResolver, ClientCallContext
from a2a.client.errors import A2AClientError
from a2a.types import TaskState

from apcore_a2a.server.caller_keys import CallerKeys
from tests._sdk import make_client, peer_http, request
from tests._support import (
    ServerProcess,
    cli_server,
    free_port,
    not_installed,
    stop_process,
    threaded_server,
    wait_http,
)
from tests.bindings._agent import (
    GATES,
    MOUNT_PATH,
    Agent,
    build_app,
    build_registry,
    host_app,
    serve_agent,
)
from tests.bindings._peers import make_client as make_peer

VERSIONS = ("1.0", "0.3")


class Callers:
    """SDK gRPC calls that each park a task at a gate, as one forwarded address or none."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.keys: list[str] = []

    async def park(self, forwarded: str | None = None) -> str:
        """``"parked"`` if the task was accepted (it waits at its gate), else the refusal."""
        key = f"fwd-{uuid.uuid4().hex}"
        self.keys.append(key)
        params = {"X-Forwarded-For": forwarded} if forwarded is not None else None
        context = ClientCallContext(service_parameters=params)
        sent = request("demo.gate", {"key": key}, return_immediately=True)
        try:
            answers = [item async for item in self.client.send_message(sent, context=context)]
        except A2AClientError as exc:
            return str(exc)
        (answer,) = answers
        assert answer.task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        ), answer
        return "parked"


@contextlib.contextmanager
def _agent(**settings: Any) -> Iterator[Agent]:
    with serve_agent(max_unfinished_tasks_per_caller=1, **settings) as agent:
        yield agent


@contextlib.asynccontextmanager
async def _calling(client: Any) -> AsyncIterator[Callers]:
    """Callers on *client*; their gates released and the client closed at the end."""
    callers = Callers(client)
    try:
        yield callers
    finally:
        for key in callers.keys:
            GATES.release(key)
        await client.close()


@contextlib.asynccontextmanager
async def _callers(agent: Agent, version: str) -> AsyncIterator[Callers]:
    """SDK gRPC callers of *agent*."""
    async with _calling(await make_client(agent.url, "GRPC", version)) as callers:
        yield callers


def _refused(answer: str) -> bool:
    """Whether *answer* is the task quota's refusal (gRPC ``RESOURCE_EXHAUSTED``)."""
    return "RESOURCE_EXHAUSTED" in answer and "at most 1 unfinished tasks per caller" in answer


@pytest.mark.parametrize("version", VERSIONS)
async def test_callers_behind_a_trusted_proxy_have_quotas_of_their_own(version: str) -> None:
    with _agent(forwarded_allow_ips=("127.0.0.1",)) as agent:
        async with _callers(agent, version) as callers:
            assert await callers.park("203.0.113.1") == "parked"
            # The same caller again: its quota is used up.
            assert _refused(await callers.park("203.0.113.1"))
            # Another caller through the same proxy is served, and so is each next one.
            assert await callers.park("203.0.113.2") == "parked"
            assert await callers.park("198.51.100.7") == "parked"
            # uvicorn's rule: the right-most address that is not a trusted proxy. A caller
            # cannot name a new address by writing one before the proxy's entry...
            assert _refused(await callers.park("192.0.2.99, 203.0.113.1"))
            # ...and the proxy's own entries (trusted) are skipped.
            assert _refused(await callers.park("203.0.113.2, 127.0.0.1"))
            # An IPv4-mapped address is its IPv4 address; an IPv6 one counts by its /64.
            assert _refused(await callers.park("::ffff:203.0.113.1"))
            assert await callers.park("2001:db8::1") == "parked"
            assert _refused(await callers.park("2001:db8::2"))
            assert await callers.park("2001:db8:0:1::1") == "parked"
            # A call without the metadata is the proxy's own: its address.
            assert await callers.park() == "parked"
            assert _refused(await callers.park())


@pytest.mark.parametrize("version", VERSIONS)
async def test_forwarded_for_from_an_untrusted_peer_is_ignored(version: str) -> None:
    # 192.0.2.1 is the only proxy: this client on 127.0.0.1 is not one, so whatever it
    # claims, its calls count as its own address.
    with _agent(forwarded_allow_ips=("192.0.2.1",)) as agent:
        async with _callers(agent, version) as callers:
            assert await callers.park("203.0.113.1") == "parked"
            assert _refused(await callers.park("203.0.113.2"))
            assert _refused(await callers.park())


async def test_forwarded_for_is_ignored_without_trusted_proxies() -> None:
    with _agent() as agent:  # the default: no proxy is trusted
        async with _callers(agent, "1.0") as callers:
            assert await callers.park("203.0.113.1") == "parked"
            assert _refused(await callers.park("203.0.113.2"))


async def test_every_peer_is_trusted_with_a_star() -> None:
    with _agent(forwarded_allow_ips=("*",)) as agent:
        async with _callers(agent, "1.0") as callers:
            assert await callers.park("203.0.113.1") == "parked"
            # '*' trusts every hop, so the left-most address is the caller (uvicorn's rule)
            assert _refused(await callers.park("203.0.113.1, 198.51.100.7"))
            assert await callers.park("198.51.100.7") == "parked"


async def test_a_trusted_network_is_a_trusted_proxy() -> None:
    with _agent(forwarded_allow_ips=("127.0.0.0/8",)) as agent:
        async with _callers(agent, "1.0") as callers:
            assert await callers.park("203.0.113.1") == "parked"
            assert await callers.park("203.0.113.2") == "parked"


@contextlib.asynccontextmanager
async def _watching(address: str, forwarded: str) -> AsyncIterator[grpc.StatusCode]:
    """A ``Health.Watch`` stream claiming *forwarded*: ``OK`` if it opened (held open until
    the block ends), else the code it was refused with."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        call = health.Watch(
            health_pb2.HealthCheckRequest(service=""), metadata=(("x-forwarded-for", forwarded),)
        )
        try:
            first = await call.read()
        except grpc.aio.AioRpcError as exc:
            yield exc.code()
            return
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        yield grpc.StatusCode.OK
        call.cancel()


@pytest.mark.parametrize("bind", ["127.0.0.1", "::"])
async def test_other_services_streams_count_by_the_forwarded_address(bind: str) -> None:
    # Bound on "::" (dual stack), the port still names an IPv4 peer 127.0.0.1, the proxy
    # forwarded_allow_ips names (grpc unmaps ::ffff:127.0.0.1).
    port, grpc_port = free_port(), free_port()
    app = build_app(
        port, grpc_port, host=bind, max_streams_per_caller=1, forwarded_allow_ips=("127.0.0.1",)
    )
    address = f"127.0.0.1:{grpc_port}"
    with threaded_server(app, port=port):
        async with _watching(address, "203.0.113.1") as first:
            assert first == grpc.StatusCode.OK
            async with _watching(address, "203.0.113.1") as same:
                # the same caller: its one stream slot is taken
                assert same == grpc.StatusCode.RESOURCE_EXHAUSTED
            async with _watching(address, "203.0.113.2") as other:
                assert other == grpc.StatusCode.OK  # another caller through the same proxy


#: Caddy in front of the agent's gRPC port: it answers h2c from the clients on 127.0.0.1
#: and dials the agent over [::1], so the agent tells Caddy (::1, trusted) apart from a
#: client that calls it directly (127.0.0.1, not trusted). Caddy trusts no client, so it
#: replaces whatever X-Forwarded-For a client sends with the client's address.
CADDYFILE = """\
{
	admin off
	servers {
		protocols h1 h2 h2c
	}
}
http://127.0.0.1:%(port)d {
	bind 127.0.0.1
	reverse_proxy h2c://[::1]:%(upstream)d
}
"""


@contextlib.contextmanager
def _caddy(tmp_path: Path, upstream: int) -> Iterator[str]:
    """Caddy proxying gRPC to *upstream* on [::1]: its ``host:port``."""
    if shutil.which("caddy") is None:
        not_installed("caddy")
    port = free_port()
    config = tmp_path / "Caddyfile"
    config.write_text(CADDYFILE % {"port": port, "upstream": upstream})
    home = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    proc = ServerProcess(
        ["caddy", "run", "--adapter", "caddyfile", "--config", str(config)],
        env={**os.environ, **home},
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", proc=proc, timeout=30)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc, timeout=20)


@contextlib.asynccontextmanager
async def _callers_at(agent_url: str, version: str, address: str) -> AsyncIterator[Callers]:
    """SDK gRPC callers (the agent's card) whose channel goes to *address* instead."""
    async with peer_http() as http:
        card = await A2ACardResolver(http, agent_url).get_agent_card()
    client = make_peer(card, "GRPC", version, channel_factory=lambda _url: insecure(address))
    async with _calling(client) as callers:
        yield callers


def insecure(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(address)


#: one unfinished task per caller
ONE_TASK = {"max_unfinished_tasks_per_caller": 1}


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_proxy_on_an_ipv6_address_is_trusted(version: str) -> None:
    # grpc names an IPv6 peer "ipv6:%5B::1%5D:port" (a quoted URI): read as it was, the
    # address was no IP address, so no IPv6 proxy was ever trusted (and IPv6 peers were
    # not counted by their network).
    port, grpc_port = free_port(), free_port()
    app = build_app(port, grpc_port, host="::", **ONE_TASK, forwarded_allow_ips=("::1",))
    with threaded_server(app, port=port) as url:
        async with _callers_at(url, version, f"[::1]:{grpc_port}") as callers:
            assert await callers.park("203.0.113.1") == "parked"
            assert _refused(await callers.park("203.0.113.1"))
            assert await callers.park("203.0.113.2") == "parked"
            assert await callers.park() == "parked"  # the proxy's own call: ::1


@pytest.mark.parametrize("version", VERSIONS)
async def test_callers_behind_caddy_count_by_the_address_caddy_forwards(
    version: str, tmp_path: Path
) -> None:
    port, grpc_port = free_port(), free_port()
    app = build_app(port, grpc_port, host="::", **ONE_TASK, forwarded_allow_ips=("::1",))
    with threaded_server(app, port=port) as url, _caddy(tmp_path, grpc_port) as proxy:
        async with (
            _callers_at(url, version, proxy) as via_caddy,
            _callers_at(url, version, f"[::1]:{grpc_port}") as caddys_address,
            _callers_at(url, version, f"127.0.0.1:{grpc_port}") as direct,
        ):
            # Through Caddy the caller is 127.0.0.1 (X-Forwarded-For), not Caddy's ::1...
            assert await via_caddy.park() == "parked"
            assert await caddys_address.park() == "parked"
            # ...its quota is used up, and Caddy replaces the address a client claims.
            assert _refused(await via_caddy.park("203.0.113.1"))
            # A client calling the agent directly is not a trusted proxy: its own address.
            assert _refused(await direct.park("203.0.113.2"))


async def test_one_forwarded_address_is_one_caller_on_both_ports() -> None:
    # The agent's HTTP port under uvicorn trusting the same proxy: an SSE stream of
    # 203.0.113.1 takes that caller's one stream slot, on the gRPC port too.
    port, grpc_port = free_port(), free_port()
    trusted = ("127.0.0.1",)
    app = build_app(port, grpc_port, max_streams_per_caller=1, forwarded_allow_ips=trusted)
    address = f"127.0.0.1:{grpc_port}"
    key = f"fwd-sse-{uuid.uuid4().hex}"
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
               "parts": [{"data": {"key": key}}], "metadata": {"skillId": "demo.gate"}}  # fmt: skip
    headers = {"A2A-Version": "1.0", "X-Forwarded-For": "203.0.113.1"}
    with threaded_server(app, port=port, forwarded_allow_ips=list(trusted)) as url:
        async with (
            peer_http(base_url=url) as http,
            http.stream(
                "POST", "/message:stream", json={"message": message}, headers=headers
            ) as sse,
        ):
            try:
                assert sse.status_code == 200
                await GATES.wait_started(key)
                async with _watching(address, "203.0.113.1") as same:
                    assert same == grpc.StatusCode.RESOURCE_EXHAUSTED
                async with _watching(address, "203.0.113.2") as other:
                    assert other == grpc.StatusCode.OK
            finally:
                GATES.release(key)


def _gated_stream(key: str) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
               "parts": [{"data": {"key": key}}], "metadata": {"skillId": "demo.gate"}}  # fmt: skip
    return {"message": message}


async def test_mounted_http_follows_the_host_server_and_grpc_the_agents_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Mounted in a Starlette host under the host's uvicorn, which trusts 127.0.0.1 (its
    # default); the agent's forwarded_allow_ips names another proxy. HTTP callers are
    # told apart by the host server's rule, gRPC callers by the agent's, and the agent
    # says so when it starts.
    port, grpc_port = free_port(), free_port()
    agent = build_app(port, grpc_port, max_streams_per_caller=1, forwarded_allow_ips=("192.0.2.1",))
    address = f"127.0.0.1:{grpc_port}"
    keys = [f"fwd-mounted-{uuid.uuid4().hex}" for _ in range(2)]
    host = threaded_server(
        host_app("starlette", agent), port=port, forwarded_allow_ips=["127.0.0.1"]
    )
    with caplog.at_level(logging.WARNING, "apcore_a2a.server"), host as url:
        async with peer_http(base_url=url + MOUNT_PATH) as http:
            streams = [
                http.stream("POST", "/message:stream", json=_gated_stream(key), headers=headers)
                for key, headers in zip(keys, FORWARDED_HEADERS, strict=True)
            ]
            try:
                async with streams[0] as first, streams[1] as second:
                    # HTTP: the host's uvicorn trusts 127.0.0.1, so two callers, a slot each
                    assert (first.status_code, second.status_code) == (200, 200)
                    # gRPC: the agent trusts 192.0.2.1 only; both calls are 127.0.0.1's
                    async with _watching(address, "203.0.113.1") as one:
                        assert one == grpc.StatusCode.OK
                        async with _watching(address, "203.0.113.2") as other:
                            assert other == grpc.StatusCode.RESOURCE_EXHAUSTED
            finally:
                for key in keys:
                    GATES.release(key)
    notes = [r.getMessage() for r in caplog.records if "forwarded_allow_ips" in r.getMessage()]
    assert notes == [
        "forwarded_allow_ips (192.0.2.1) is read by the gRPC port only: HTTP callers' "
        "addresses are read by the server this app runs under (uvicorn: "
        "--forwarded-allow-ips, 127.0.0.1 and ::1 unless told otherwise); trust the same "
        "proxies there"
    ]


async def test_a_mounted_agent_without_grpc_says_its_forwarded_setting_does_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from apcore_a2a import async_serve

    port = free_port()
    agent = async_serve(build_registry(), environ={}, port=port, forwarded_allow_ips=("10.0.0.5",))
    host = threaded_server(host_app("starlette", agent), port=port)
    with caplog.at_level(logging.WARNING, "apcore_a2a.server"), host as url:
        async with peer_http() as http:
            card = await http.get(url + MOUNT_PATH + "/.well-known/agent-card.json")
        assert card.status_code == 200
    notes = [r.getMessage() for r in caplog.records if "forwarded_allow_ips" in r.getMessage()]
    assert notes == [
        "forwarded_allow_ips (10.0.0.5) has no effect: no gRPC port, and HTTP callers' "
        "addresses are read by the server this app runs under (uvicorn: "
        "--forwarded-allow-ips, 127.0.0.1 and ::1 unless told otherwise)"
    ]


#: two HTTP callers behind one proxy
FORWARDED_HEADERS = [{"A2A-Version": "1.0", "X-Forwarded-For": f"203.0.113.{n}"} for n in (1, 2)]


@pytest.mark.parametrize(
    ("trusted", "other"),
    [((), grpc.StatusCode.RESOURCE_EXHAUSTED), (("127.0.0.1",), grpc.StatusCode.OK)],
    ids=["no-proxy", "proxy"],
)
async def test_serve_reads_forwarded_allow_ips_alike_on_both_ports(
    trusted: tuple[str, ...], other: grpc.StatusCode
) -> None:
    # "No proxy" has one spelling, the empty list (the default): through `serve`, both
    # ports then ignore a forwarded address (one caller, its one stream slot taken over
    # HTTP); a named proxy is trusted on both (two callers).
    grpc_port = free_port()
    args = ["--extensions-dir", "examples/extensions", "--grpc-port", str(grpc_port),
            "--max-streams-per-caller", "1", "--cancel-on-disconnect"]  # fmt: skip
    args += [arg for address in trusted for arg in ("--forwarded-allow-ip", address)]
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
               "parts": [{"data": {"seconds": 60}}], "metadata": {"skillId": "jobs.sleep"}}  # fmt: skip
    headers = {"A2A-Version": "1.0", "X-Forwarded-For": "203.0.113.1"}
    with cli_server(args) as (base, _proc):
        async with (
            peer_http(base_url=base) as http,
            http.stream(
                "POST", "/message:stream", json={"message": message}, headers=headers
            ) as sse,
        ):
            assert sse.status_code == 200
            lines = sse.aiter_lines()  # kept: a dropped iterator closes the stream
            await anext(lines)  # the stream is open: its slot is held
            async with _watching(f"127.0.0.1:{grpc_port}", "203.0.113.2") as code:
                assert code == other


class _PeerOnly:
    """What ``CallerKeys.of_call`` reads of a grpc.aio servicer context: its peer and metadata.
    (A real IPv6 peer other than ::1, counted alone, needs an address this machine lacks.)"""

    def __init__(self, peer: str) -> None:
        self._peer = peer

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-forwarded-for", "203.0.113.1"),)


async def test_an_ipv6_peer_counts_by_its_network() -> None:
    # grpc's own quoting of IPv6 peers (test_a_proxy_on_an_ipv6_address_is_trusted reads it
    # from a real call): two addresses of one /64 are one caller, as over HTTP.
    untrusting = CallerKeys(64)
    keys = {
        await untrusting.of_call(None, _PeerOnly(f"ipv6:%5B2001:db8::{n}%5D:5000"))  # type: ignore[arg-type]
        for n in (7, 8)
    }
    assert keys == {"ip:2001:db8::/64"}
    trusting = CallerKeys(64, ["2001:db8::/64"])
    forwarded = await trusting.of_call(None, _PeerOnly("ipv6:%5B2001:db8::7%5D:5000"))  # type: ignore[arg-type]
    assert forwarded == "ip:203.0.113.1"
