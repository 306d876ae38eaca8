"""A stored push config whose row cannot be read costs that config only, on every binding.

A row of ``push_notification_configs`` can hold JSON its ``protocol_version`` does not
describe (1.0 or 0.3), a ciphertext of a key the agent no longer has, bytes that are no
ciphertext, or a ``protocol_version`` no release wrote. Here five such rows sit beside two good configs
of the same task, another task's and another owner's, on SQLite and PostgreSQL with
``push_encryption_key`` set: the agent starts, lists leave the damaged configs out, ``Get``
of one answers the typed ``PushConfigUnreadableError`` (of a good one, the config), the
task's state change is delivered to its good configs, each damaged config is logged once
at WARNING by task and config id (never its content), reads rewrite and delete nothing,
and the owner can delete a damaged config.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.types import (
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
)
from cryptography.fernet import Fernet

from tests.bindings._grpc import failure, rich_status, stubs

from .._support import TLS, free_port
from ._agent import Receiver, add_message, push_agent, receiver, skill_message
from ._rows import config_rows, damage_rows

KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef00"}
#: In every damaged row's content (a token, a URL path), which no answer or log may show.
SECRET = "s3cret-" + uuid.uuid4().hex
GOOD = ("g1", "g2")
DAMAGED = ("d-json", "d-key", "d-cipher", "d-version", "d-v03")
OWNER = {name: {"X-API-Key": k, "A2A-Version": "1.0"} for name, k in KEYS.items()}


def _damages(key: str) -> dict[str, tuple[str | None, bytes]]:
    """How each damaged config's row is stored: (its protocol_version, its config_data)."""
    v03_json = json.dumps(
        {"url": f"http://127.0.0.1:9/{SECRET}", "authentication": {"schemes": ["Bearer"]}}
    ).encode()
    # A header where 0.3 wants an object: pydantic's error quotes it (the SDK logged it).
    header = {"url": "http://127.0.0.1:9/p", "authentication": f"Bearer {SECRET}"}
    v03_header = json.dumps(header).encode()
    v10_json = json.dumps({"id": "x", "url": "http://127.0.0.1:9/x", "token": SECRET}).encode()
    return {
        "d-json": ("1.0", Fernet(key.encode()).encrypt(v03_json)),
        "d-key": ("1.0", Fernet(Fernet.generate_key()).encrypt(v10_json)),
        "d-cipher": ("1.0", b"gAAAAA" + SECRET.encode()),
        "d-version": ("9.9", Fernet(key.encode()).encrypt(v10_json)),
        "d-v03": ("0.3", Fernet(key.encode()).encrypt(v03_header)),
    }


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _no_internals(text: str) -> None:
    for leak in ("Traceback", SECRET, "site-packages", "127.0.0.1:9"):
        assert leak not in text, text


async def _listed_ids(
    http: httpx.AsyncClient, base: str, task_id: str, grpc_address: str
) -> list[list[str]]:
    """The config ids alice's list answers, on each binding and version."""
    alice = {"X-API-Key": KEYS["alice"]}
    answers: list[list[str]] = []
    reply = await http.post(
        base + "/",
        json=_rpc("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        headers={**alice, "A2A-Version": "1.0"},
    )
    answers.append([c["id"] for c in reply.json()["result"].get("configs", [])])
    reply = await http.post(
        base + "/",
        json=_rpc("tasks/pushNotificationConfig/list", {"id": task_id}),
        headers={**alice, "A2A-Version": "0.3"},
    )
    answers.append([c["pushNotificationConfig"]["id"] for c in reply.json()["result"]])
    reply = await http.get(
        f"{base}/tasks/{task_id}/pushNotificationConfigs", headers={**alice, "A2A-Version": "1.0"}
    )
    assert reply.status_code == 200, reply.text
    answers.append([c["id"] for c in reply.json().get("configs", [])])
    reply = await http.get(
        f"{base}/v1/tasks/{task_id}/pushNotificationConfigs",
        headers={**alice, "A2A-Version": "0.3"},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    configs = body.get("configs", []) if isinstance(body, dict) else body
    answers.append([c["pushNotificationConfig"]["id"] for c in configs])
    async with stubs(grpc_address) as (v1, v03):
        metadata = (("x-api-key", KEYS["alice"]),)
        got = await v1.ListTaskPushNotificationConfigs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id), metadata=metadata
        )
        answers.append([c.id for c in got.configs])
        got03 = await v03.ListTaskPushNotificationConfig(
            pb2_v03.ListTaskPushNotificationConfigRequest(parent=f"tasks/{task_id}"),
            metadata=metadata,
        )
        answers.append([c.push_notification_config.id for c in got03.configs])
    for answer in answers:
        answer.sort()
    return answers


async def _assert_get_unreadable(
    http: httpx.AsyncClient, base: str, task_id: str, config_id: str, grpc_address: str
) -> None:
    alice = {"X-API-Key": KEYS["alice"]}
    for version, body in (
        ("1.0", _rpc("GetTaskPushNotificationConfig", {"taskId": task_id, "id": config_id})),
        ("0.3", _rpc("tasks/pushNotificationConfig/get",
                     {"id": task_id, "pushNotificationConfigId": config_id})),
    ):  # fmt: skip
        reply = await http.post(base + "/", json=body, headers={**alice, "A2A-Version": version})
        error = reply.json()["error"]
        assert error["code"] == -32096, (version, reply.text)
        assert config_id in error["message"] and "cannot be read" in error["message"]
        _no_internals(reply.text)
    for path, version in (
        (f"/tasks/{task_id}/pushNotificationConfigs/{config_id}", "1.0"),
        (f"/v1/tasks/{task_id}/pushNotificationConfigs/{config_id}", "0.3"),
    ):
        reply = await http.get(base + path, headers={**alice, "A2A-Version": version})
        assert reply.status_code == 500, reply.text
        assert "PUSH_CONFIG_UNREADABLE" in reply.text and "cannot be read" in reply.text
        _no_internals(reply.text)
    async with stubs(grpc_address) as (v1, v03):
        metadata = (("x-api-key", KEYS["alice"]),)
        name = f"tasks/{task_id}/pushNotificationConfigs/{config_id}"
        for call in (
            v1.GetTaskPushNotificationConfig(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id),
                metadata=metadata,
            ),
            v03.GetTaskPushNotificationConfig(
                pb2_v03.GetTaskPushNotificationConfigRequest(name=name), metadata=metadata
            ),
        ):
            status = rich_status(await failure(call))
            assert status["code"] == grpc.StatusCode.DATA_LOSS, status
            assert status["reason"] == "PUSH_CONFIG_UNREADABLE", status
            _no_internals(status["message"])


async def _register(rec: Receiver, settings: dict[str, Any]) -> tuple[str, str, str]:
    """Alice's parked task, her finished task and bob's, each with configs: the ids."""
    async with (
        push_agent(**settings) as (base, _app),
        httpx.AsyncClient(timeout=30, verify=TLS) as http,
    ):
        ids = []
        for who, message in (("alice", skill_message("demo.transfer", 1)),
                             ("alice", add_message()), ("bob", add_message())):  # fmt: skip
            body = _rpc("SendMessage", {"message": message})
            reply = await http.post(base + "/", json=body, headers=OWNER[who])
            ids.append(reply.json()["result"]["task"]["id"])
        task_id, other_id, bob_id = ids
        registered = [(task_id, c, "alice") for c in (*GOOD, *DAMAGED)]
        registered += [(other_id, "o1", "alice"), (bob_id, "b1", "bob")]
        for tid, config_id, who in registered:
            params = {"taskId": tid, "id": config_id, "url": rec.url(f"/{config_id}")}
            body = _rpc("CreateTaskPushNotificationConfig", params)
            reply = await http.post(base + "/", json=body, headers=OWNER[who])
            assert "result" in reply.json(), reply.text
    return task_id, other_id, bob_id


async def _delete_each(http: httpx.AsyncClient, base: str, task_id: str) -> None:
    """The owner repairs by deleting: on JSON-RPC and REST, 1.0 and 0.3."""
    deletes = {
        "d-json": ("POST", "/", "1.0", _rpc("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "d-json"})),
        "d-key": ("POST", "/", "0.3", _rpc("tasks/pushNotificationConfig/delete", {"id": task_id, "pushNotificationConfigId": "d-key"})),
        "d-cipher": ("DELETE", f"/tasks/{task_id}/pushNotificationConfigs/d-cipher", "1.0", None),
        "d-version": ("DELETE", f"/v1/tasks/{task_id}/pushNotificationConfigs/d-version", "0.3", None),
        "d-v03": ("POST", "/", "1.0", _rpc("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "d-v03"})),
    }  # fmt: skip
    for config_id, (verb, path, version, body) in deletes.items():
        headers = {"X-API-Key": KEYS["alice"], "A2A-Version": version}
        reply = await http.request(verb, base + path, json=body, headers=headers)
        assert reply.status_code == 200 and "error" not in reply.json(), (config_id, reply.text)


async def test_a_damaged_push_config_costs_only_itself(
    sql_store: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = Fernet.generate_key().decode()
    settings: dict[str, Any] = {
        "task_store": sql_store,
        "push_encryption_key": key,
        "api_keys": tuple(f"{k}={owner}" for owner, k in KEYS.items()),
    }
    async with receiver() as rec:
        task_id, other_id, bob_id = await _register(rec, settings)
        await damage_rows(sql_store, task_id, _damages(key))
        stored = await config_rows(sql_store)

        caplog.set_level(logging.INFO)
        grpc_port = free_port()
        address = f"127.0.0.1:{grpc_port}"
        # The start reads configs (the sender's bookkeeping): it starts all the same.
        async with (
            push_agent(**settings, grpc_port=grpc_port) as (base, app),
            httpx.AsyncClient(timeout=30, verify=TLS) as http,
        ):
            for _ in range(2):  # read again: no second warning
                assert await _listed_ids(http, base, task_id, address) == [list(GOOD)] * 6
            for config_id in DAMAGED:
                await _assert_get_unreadable(http, base, task_id, config_id, address)
            body = _rpc("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "g1"})
            reply = await http.post(base + "/", json=body, headers=OWNER["alice"])
            assert reply.json()["result"]["id"] == "g1", reply.text
            for tid, config_id, who in ((other_id, "o1", "alice"), (bob_id, "b1", "bob")):
                body = _rpc("ListTaskPushNotificationConfigs", {"taskId": tid})
                reply = await http.post(base + "/", json=body, headers=OWNER[who])
                assert [c["id"] for c in reply.json()["result"]["configs"]] == [config_id]
            # Bob learns nothing of alice's damaged config.
            body = _rpc("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "d-json"})
            reply = await http.post(base + "/", json=body, headers=OWNER["bob"])
            assert reply.json()["error"]["code"] == -32001, reply.text

            # The task changes state: its good configs are told, and only they.
            body = _rpc("CancelTask", {"id": task_id})
            reply = await http.post(base + "/", json=body, headers=OWNER["alice"])
            assert reply.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED", reply.text
            await rec.wait_for(
                lambda: all(b"TASK_STATE_CANCELED" in d.body
                            for c in GOOD for d in rec.accepted(f"/{c}")[-1:])
            )  # fmt: skip
            await app.state.a2a.extras["push"].sender.idle()
            assert {d.path for d in rec.log} == {f"/{c}" for c in GOOD}
            assert {d.status for d in rec.log} == {204}
            assert await config_rows(sql_store) == stored  # nothing read was rewritten or deleted

            await _delete_each(http, base, task_id)
    left = {(row[0], row[1]) for row in await config_rows(sql_store)}
    assert left == {(task_id, "g1"), (task_id, "g2"), (other_id, "o1"), (bob_id, "b1")}

    assert SECRET not in caplog.text
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [r for r in warned if SECRET in r.getMessage() or r.exc_info], [
        r.getMessage() for r in warned
    ]
    for config_id in DAMAGED:
        about = [r for r in warned if f"push config {config_id}:" in r.getMessage()]
        assert len(about) == 1, [r.getMessage() for r in about]
        assert task_id in about[0].getMessage()
        assert about[0].name == "apcore_a2a.upstream.unreadable_push_configs"
