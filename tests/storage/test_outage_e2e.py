"""A task store outage is a retryable, typed answer on every binding.

PostgreSQL behind a TCP proxy that the test cuts: while it is down, calls that need the
store get ``StoreUnavailableError`` (JSON-RPC -32092 with ``retryAfter``, REST 503 with
``Retry-After``, gRPC ``UNAVAILABLE``), not an internal error; once it is back, the same
agent serves again and the task written before the outage is intact.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest
from apcore import Registry

from apcore_a2a import A2AServerFactory
from apcore_a2a.storage.quota_slots import LEASE_SECONDS
from tests._sdk import make_client, request

from .._modules import Add
from .._postgres import PG_HOST, PG_PORT, pg_schema_url
from .._proxy import TcpProxy
from .._support import TLS, free_port, running_server

V10 = {"A2A-Version": "1.0"}


def _send(skill: str = "demo.add") -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 1, "b": 2}}],
        "metadata": {"skillId": skill},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


@pytest.mark.postgres
@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
async def test_an_outage_answers_retryable_errors_and_loses_nothing(cluster: bool) -> None:
    proxy = TcpProxy(PG_HOST, PG_PORT)
    await proxy.start()
    registry = Registry()
    registry.register("demo.add", Add())
    grpc_port = free_port()
    try:
        async with pg_schema_url() as pg_url:
            url = pg_url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
            app, _ = A2AServerFactory(
                registry, environ={}, task_store=url, grpc_port=grpc_port, cluster=cluster
            ).create()
            async with (
                running_server(app) as base,
                httpx.AsyncClient(base_url=base, verify=TLS) as http,
            ):
                before = (await http.post("/", json=_send(), headers=V10)).json()
                task_id = before["result"]["task"]["id"]

                await proxy.stop()
                # Past the lease a process keeps on a quota slot (cluster mode: the slots
                # are in the database too).
                await asyncio.sleep(LEASE_SECONDS + 0.5)
                sent = (await http.post("/", json=_send(), headers=V10)).json()
                assert sent["error"]["code"] == -32092, sent
                (info,) = sent["error"]["data"]
                assert info["reason"] == "TASK_STORE_UNAVAILABLE"
                assert info["metadata"]["retryAfter"] == "2"
                message = _send()["params"]
                rest_sent = await http.post("/message:send", json=message, headers=V10)
                assert rest_sent.status_code == 503, rest_sent.text
                assert rest_sent.headers["retry-after"] == "2"
                streamed = {**_send(), "method": "SendStreamingMessage"}
                stream = await http.post("/", json=streamed, headers=V10)
                assert stream.status_code in (200, 503), stream.text
                assert "-32092" in stream.text, stream.text
                got = (
                    await http.post(
                        "/",
                        json={
                            "jsonrpc": "2.0",
                            "id": 2,
                            "method": "GetTask",
                            "params": {"id": task_id},
                        },
                        headers=V10,
                    )
                ).json()
                assert got["error"]["code"] == -32092, got
                rest = await http.get(f"/tasks/{task_id}", headers=V10)
                assert rest.status_code == 503, rest.text
                assert rest.headers["retry-after"] == "2"
                # A2A 0.3 clients get the same on both bindings.
                old = {"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": task_id}}
                got03 = (await http.post("/", json=old, headers={"A2A-Version": "0.3"})).json()
                assert got03["error"]["code"] == -32092, got03
                rest03 = await http.get(f"/v1/tasks/{task_id}")
                assert rest03.status_code == 503, rest03.text
                assert rest03.headers["retry-after"] == "2"
                for version in ("1.0", "0.3"):
                    client = await make_client(base, "GRPC", version)
                    try:
                        with pytest.raises(Exception) as refused:
                            await client.get_task(GetTaskRequest(id=task_id))
                        cause = refused.value.__cause__ or refused.value
                        text = f"{type(refused.value).__name__} {refused.value} {cause}"
                        assert "UNAVAILABLE" in text or "StoreUnavailable" in text, text
                    finally:
                        await client.close()
                # New tasks over gRPC, blocking and streamed (a stream takes a quota slot).
                for streaming in (False, True):
                    client = await make_client(base, "GRPC", "1.0", streaming=streaming)
                    try:
                        with pytest.raises(Exception) as refused:
                            async for _ in client.send_message(
                                request("demo.add", {"a": 1, "b": 2})
                            ):
                                pass
                        cause = refused.value.__cause__ or refused.value
                        text = f"{type(refused.value).__name__} {refused.value} {cause}"
                        assert "UNAVAILABLE" in text or "StoreUnavailable" in text, text
                    finally:
                        await client.close()

                await proxy.start()
                again = (
                    await http.post(
                        "/",
                        json={
                            "jsonrpc": "2.0",
                            "id": 3,
                            "method": "GetTask",
                            "params": {"id": task_id},
                        },
                        headers=V10,
                    )
                ).json()
                assert again["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
                assert again["result"]["artifacts"] == before["result"]["task"]["artifacts"]
                after = (await http.post("/", json=_send(), headers=V10)).json()
                assert after["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        await proxy.stop()
