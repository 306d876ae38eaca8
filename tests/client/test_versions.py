"""Every request the client sends for a 1.0 method says ``A2A-Version: 1.0``, on every
binding (A2A 1.0.1 §3.6.1; §3.6.2: a request without it is a 0.3 request).

The peers are plain a2a-sdk 1.3 agents, which refuse a 1.0 method without the header
(JSON-RPC -32009, REST 400): every call below is made, and every request recorded.
gRPC servicers of a2a-sdk 1.3 do not check the metadata, so an interceptor records it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore
from a2a.types import a2a_pb2_grpc
from starlette.applications import Starlette

from apcore_a2a.client import A2AClient, A2ARemoteError, VersionNotSupportedError
from tests._support import free_port, running_server
from tests.client._sdk_agent import EchoExecutor, agent_card, build_sdk_app
from tests.client._stub_agent import Recorder

HOOK = "http://127.0.0.1:9/hook"


async def _every_call(client: A2AClient) -> None:
    """Each A2A 1.0 method once (errors the agent answers with are fine, a version one not)."""
    task = await client.send_message("hello")
    assert task["status"]["state"] == "completed"
    assert [e async for e in client.stream_message("streamed")][-1]["final"] is True
    assert (await client.get_task(task["id"]))["id"] == task["id"]
    assert (await client.list_tasks())["tasks"]
    slow = await client.send_message("slow", return_immediately=True)
    stream = client.resubscribe(slow["id"])
    assert (await anext(stream))["id"] == slow["id"]
    assert (await client.cancel_task(slow["id"]))["status"]["state"] == "canceled"
    await stream.aclose()
    await client.set_push_config(task["id"], {"url": HOOK, "id": "c1"})
    assert (await client.get_push_config(task["id"], "c1"))["id"] == "c1"
    assert [c["id"] for c in await client.list_push_configs(task["id"])] == ["c1"]
    await client.delete_push_config(task["id"], "c1")
    with pytest.raises(A2ARemoteError) as refused:
        await client.get_extended_card()
    assert not isinstance(refused.value, VersionNotSupportedError)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_http_bindings_send_the_version_with_every_call(binding: str) -> None:
    url = "http://sdk.local"
    recorder = Recorder(build_sdk_app(url, versions=("1.0",), binding=binding))
    async with A2AClient(url, app=recorder) as client:
        await _every_call(client)
        # The control: this agent refuses a 1.0 call that does not say its version.
        http = httpx.AsyncClient(transport=httpx.ASGITransport(recorder), base_url=url)
        async with http:
            bare = await http.get("/tasks/t-1")
    assert bare.status_code == 400 and "VERSION_NOT_SUPPORTED" in bare.text
    calls = [s for s in recorder.seen[:-1] if not s.path.startswith("/.well-known/")]
    assert len(calls) >= 12
    assert {s.headers.get("a2a-version") for s in calls} == {"1.0"}, calls


class _Versions(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Records the ``a2a-version`` metadata of every gRPC call."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        metadata = dict(details.invocation_metadata or ())
        self.seen.append((details.method.rsplit("/", 1)[-1], metadata.get("a2a-version")))
        return await continuation(details)


@contextlib.asynccontextmanager
async def _grpc_agent() -> AsyncIterator[tuple[str, _Versions]]:
    """A plain a2a-sdk agent on gRPC only; its card (over HTTP) names the gRPC address."""
    grpc_port = free_port()
    card = agent_card(f"127.0.0.1:{grpc_port}", versions=("1.0",), binding="GRPC")
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore(),
    )
    versions = _Versions()
    server = grpc.aio.server(interceptors=[versions])
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()
    try:
        async with running_server(Starlette(routes=create_agent_card_routes(card))) as url:
            yield url, versions
    finally:
        await server.stop(0)
        await handler.aclose()


async def test_grpc_sends_the_version_with_every_call() -> None:
    async with _grpc_agent() as (url, versions), A2AClient(url, timeout=30) as client:
        await _every_call(client)
    assert len(versions.seen) >= 12
    assert {version for _, version in versions.seen} == {"1.0"}, versions.seen
