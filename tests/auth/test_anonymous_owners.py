"""Anonymous callers of an agent that authenticates others own their tasks by address.

With ``api_keys`` (or JWT) configured and ``require_auth=false``, callers without
credentials shared one owner: any of them listed every other anonymous caller's tasks, read
them, canceled them and registered webhooks on them (which then received their results).
Now an anonymous caller's owner is its address key (IPv6: its /64, as quotas count it), on
every binding. Addresses are simulated with ``X-Forwarded-For`` (HTTP: uvicorn trusts
127.0.0.1; gRPC: ``forwarded_allow_ips``). Without authentication the agent is single-tenant
and says so at start.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import GetTaskRequest

from tests._support import TLS, free_port
from tests.bindings._grpc import stubs
from tests.push._agent import add_message, push_agent, rpc

KEYS = ("key-alice-0123456789=alice",)
ALICE = {"X-API-Key": "key-alice-0123456789"}


def _at(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


async def _task_of(http: httpx.AsyncClient, base: str, headers: dict[str, str]) -> str:
    http.headers.update(headers)
    try:
        return str(
            (await rpc(http, base, "SendMessage", {"message": add_message()}))["result"]["task"][
                "id"
            ]
        )
    finally:
        for name in headers:
            del http.headers[name]


async def _what(
    http: httpx.AsyncClient, base: str, headers: dict[str, str], task_id: str
) -> dict[str, Any]:
    """What a caller with *headers* gets of *task_id*: each call's error code or result."""
    http.headers.update(headers)
    try:
        hook = {"taskId": task_id, "id": "w", "url": "http://127.0.0.1:9/hook"}
        calls = {
            "get": ("GetTask", {"id": task_id}),
            "cancel": ("CancelTask", {"id": task_id}),
            "webhook": ("CreateTaskPushNotificationConfig", hook),
        }
        out: dict[str, Any] = {}
        for name, (method, params) in calls.items():
            answer = await rpc(http, base, method, params)
            out[name] = answer["error"]["code"] if "error" in answer else "result"
        listed = (await rpc(http, base, "ListTasks", {}))["result"].get("tasks", [])
        out["listed"] = task_id in [t["id"] for t in listed]
        return out
    finally:
        for name in headers:
            del http.headers[name]


async def _grpc_get(grpc_port: int, address: str, task_id: str) -> grpc.StatusCode:
    async with stubs(f"127.0.0.1:{grpc_port}") as (v1, _v03):
        try:
            await v1.GetTask(GetTaskRequest(id=task_id), metadata=(("x-forwarded-for", address),))
        except grpc.aio.AioRpcError as error:
            return error.code()
        return grpc.StatusCode.OK


async def test_anonymous_callers_at_other_addresses_never_see_each_others_tasks() -> None:
    grpc_port = free_port()
    settings = {"api_keys": KEYS, "require_auth": False, "grpc_port": grpc_port}
    settings["forwarded_allow_ips"] = ("127.0.0.1",)
    async with (
        push_agent(**settings) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as http,
    ):
        theirs = await _task_of(http, base, _at("203.0.113.1"))
        stranger = {"get": -32001, "cancel": -32001, "webhook": -32001, "listed": False}
        assert await _what(http, base, _at("203.0.113.2"), theirs) == stranger
        assert await _what(http, base, ALICE, theirs) == stranger
        assert await _grpc_get(grpc_port, "203.0.113.2", theirs) == grpc.StatusCode.NOT_FOUND
        # The same address (on every binding) is the same anonymous caller.
        assert await _grpc_get(grpc_port, "203.0.113.1", theirs) == grpc.StatusCode.OK
        # An IPv6 caller is its /64, as its quotas count it.
        v6 = await _task_of(http, base, _at("2001:db8:1:2::1"))
        same_host = await _what(http, base, _at("2001:db8:1:2::ffff"), v6)
        assert same_host["get"] == "result" and same_host["listed"]
        assert (await _what(http, base, _at("2001:db8:1:3::1"), v6))["get"] == -32001
        # Nor does an anonymous caller see an authenticated caller's task (as before).
        alices = await _task_of(http, base, ALICE)
        assert await _what(http, base, _at("203.0.113.1"), alices) == stranger
        own = await _what(http, base, _at("203.0.113.1"), theirs)
        assert own == {"get": "result", "cancel": -32002, "webhook": "result", "listed": True}


@pytest.mark.parametrize(
    ("settings", "level"),
    [
        ({"api_keys": KEYS}, None),
        # Under a server of the test's own, whose address the agent does not know (served
        # standalone on 127.0.0.1 it is INFO: tests/storage/test_replicas_e2e.py's agents
        # log no WARNING).
        ({}, logging.WARNING),
    ],
)
async def test_an_agent_without_authentication_says_it_is_single_tenant(
    settings: dict[str, Any], level: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="apcore_a2a")
    async with push_agent(**settings):
        pass
    said = [r for r in caplog.records if "this agent is single-tenant" in r.getMessage()]
    assert [r.levelno for r in said] == ([] if level is None else [level])
