"""Tripwire of ``upstream/grpc_proxies.py``: grpcio 1.85 reads ``no_grpc_proxy`` (else
``no_proxy``) from the environment by its own rule even for a proxy given as the channel
option ``grpc.http_proxy``: a call to an exempted host goes direct, the proxy never asked.

The day ``test_grpcio_exempts_by_the_environment_despite_the_channel_option`` fails,
grpcio reads only the channel option, and the client can hand it the proxy as that option
again. The correction's own effect: ``tests/client/test_grpc_proxy.py``.
"""

from __future__ import annotations

import grpc
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc

from apcore_a2a.upstream.grpc_proxies import through_proxy
from tests._forward_proxy import forward_proxy, without_proxies
from tests._support import free_port


class _Agent(a2a_pb2_grpc.A2AServiceServicer):
    async def GetTask(self, request: pb.GetTaskRequest, context: object) -> pb.Task:
        return pb.Task(id=request.id)


async def _asked(monkeypatch: pytest.MonkeyPatch, ours: bool, **env: str) -> list[str]:
    """What the proxy was asked for one GetTask to a gRPC server on 127.0.0.1."""
    without_proxies(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Agent(), server)  # type: ignore[no-untyped-call]
    address = f"127.0.0.1:{free_port()}"
    assert server.add_insecure_port(address)
    await server.start()
    try:
        async with forward_proxy({}) as px:
            target, options = "dns:///" + address, [("grpc.http_proxy", px.url)]
            if ours:
                target, options = through_proxy(px.url, address)
            async with grpc.aio.insecure_channel(target, options) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
                assert (await stub.GetTask(pb.GetTaskRequest(id="t"), timeout=30)).id == "t"
            return px.asked
    finally:
        await server.stop(0)


@pytest.mark.parametrize("exempt", ["no_grpc_proxy", "no_proxy"])
async def test_grpcio_exempts_by_the_environment_despite_the_channel_option(
    monkeypatch: pytest.MonkeyPatch, exempt: str
) -> None:
    assert await _asked(monkeypatch, False, **{exempt: "127.0.0.0/8"}) == []


async def test_the_correction_asks_the_proxy_whatever_the_environment_exempts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = await _asked(monkeypatch, True, no_grpc_proxy="*", no_proxy="*")
    assert len(asked) == 1 and asked[0].startswith("CONNECT 127.0.0.1:"), asked
