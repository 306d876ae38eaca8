"""Push config methods on every binding: -32003 when off, SSRF refusals, response shapes,
official SDK clients (1.0 and 0.3), JWKS and card."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)

from apcore_a2a.push import JWKS_PATH, PUSH_SIGNING_EXTENSION_URI
from tests._support import TLS

from ._agent import V1, add_message, push_agent, rpc
from .test_push_policy import SECURE_TABLE

module_loop = pytest.mark.asyncio(loop_scope="module")


async def _completed_task(client: httpx.AsyncClient, base: str) -> str:
    reply = await rpc(client, base, "SendMessage", {"message": add_message()})
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    return str(reply["result"]["task"]["id"])


async def test_without_the_option_config_methods_answer_32003() -> None:
    async with (
        push_agent(push_notifications=False) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        task_id = await _completed_task(client, base)
        url = "http://127.0.0.1:9/hook"
        for method, params, version in [
            ("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}, "1.0"),
            ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "x"}, "1.0"),
            ("ListTaskPushNotificationConfigs", {"taskId": task_id}, "1.0"),
            ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "x"}, "1.0"),
            (
                "tasks/pushNotificationConfig/set",
                {"taskId": task_id, "pushNotificationConfig": {"url": url}},
                "0.3",
            ),
            (
                "tasks/pushNotificationConfig/get",
                {"id": task_id, "pushNotificationConfigId": "x"},
                "0.3",
            ),
            ("tasks/pushNotificationConfig/list", {"id": task_id}, "0.3"),
            (
                "tasks/pushNotificationConfig/delete",
                {"id": task_id, "pushNotificationConfigId": "x"},
                "0.3",
            ),
        ]:
            reply = await rpc(client, base, method, params, version=version)
            assert reply["error"]["code"] == -32003, (method, reply)
        rest = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs", json={"url": url}, headers=V1
        )
        v03 = f"{base}/v1/tasks/{task_id}/pushNotificationConfigs"
        # The 0.3 spec's body has no name (nor the RPC request's parent): the SDK's route
        # answered "No task for", with nothing after it.
        rest03 = [
            await client.post(v03, json={"pushNotificationConfig": {"url": url}}),
            await client.post(
                v03, json={"taskId": task_id, "pushNotificationConfig": {"url": url}}
            ),
            await client.delete(f"{v03}/x"),
        ]
        for answer in (rest, *rest03):
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["message"] == "Push notifications are not supported by the agent"
            assert error["details"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
        card = (await client.get(base + "/.well-known/agent-card.json")).json()
        assert card["capabilities"].get("pushNotifications", False) is False
        uris = [e["uri"] for e in card["capabilities"].get("extensions", [])]
        assert PUSH_SIGNING_EXTENSION_URI not in uris
        assert (await client.get(base + JWKS_PATH)).status_code == 404


async def test_card_advertises_push_and_the_jwks() -> None:
    async with push_agent() as (base, _app), httpx.AsyncClient(timeout=10, verify=TLS) as client:
        card = (await client.get(base + "/.well-known/agent-card.json")).json()
        assert card["capabilities"]["pushNotifications"] is True
        (ext,) = [
            e for e in card["capabilities"]["extensions"] if e["uri"] == PUSH_SIGNING_EXTENSION_URI
        ]
        assert ext["params"] == {
            "jwksUrl": base + JWKS_PATH,
            "algorithm": "ES256",
            "header": "X-A2A-Signature",
        }
        jwks = await client.get(ext["params"]["jwksUrl"])
        assert jwks.status_code == 200
        assert jwks.headers["cache-control"] == "public, max-age=300"
        (key,) = jwks.json()["keys"]
        assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("EC", "P-256", "ES256", "sig")
        assert "d" not in key


@module_loop
@pytest.mark.parametrize(("url", "reason"), SECURE_TABLE)
async def test_secure_agent_refuses_unsafe_urls_with_the_reason_on_every_binding(
    url: str, reason: str, secure_agent: tuple[str, str]
) -> None:
    base, task_id = secure_agent
    expected = f"Invalid push notification URL: {reason}"
    async with httpx.AsyncClient(timeout=10, verify=TLS) as client:
        new = await rpc(
            client, base, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}
        )
        assert new["error"]["code"] == -32602
        assert new["error"]["message"] == expected
        old = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": {"url": url}},
            version="0.3",
        )
        assert old["error"]["code"] == -32602
        assert old["error"]["message"] == expected
        rest = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs", json={"url": url}, headers=V1
        )
        assert rest.status_code == 400
        assert rest.json()["error"]["message"] == expected
        send = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": add_message(),
                "configuration": {"taskPushNotificationConfig": {"url": url}},
            },
        )
        assert send["error"]["code"] == -32602
        assert send["error"]["message"] == expected
        listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert listed["result"].get("configs", []) == []


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/a\x01b", "URL contains a control character"),
        ("/a\x7fb", "URL contains a control character"),
        # urlsplit drops tabs and line breaks before parsing; the sender's client does not.
        ("/hook\t", "URL contains a control character"),
        ("/" + "a" * 70_000, "URL is longer than 65536 characters"),
    ],
    ids=["soh", "del", "tab", "70k"],
)
async def test_a_url_the_sender_could_not_send_is_refused_at_registration(
    path: str, reason: str
) -> None:
    # Allowed host (loopback, insecure mode): only the URL's own text is wrong. Before, such
    # a config was stored ``active`` and every delivery to it vanished without a count.
    async with push_agent() as (base, _app), httpx.AsyncClient(timeout=10, verify=TLS) as client:
        task_id = await _completed_task(client, base)
        url = f"http://127.0.0.1:9{path}"
        expected = f"Invalid push notification URL: {reason}"
        new = await rpc(
            client, base, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}
        )
        assert (new["error"]["code"], new["error"]["message"]) == (-32602, expected)
        rest = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs", json={"url": url}, headers=V1
        )
        assert (rest.status_code, rest.json()["error"]["message"]) == (400, expected)
        config = {"taskPushNotificationConfig": {"url": url}}
        send = await rpc(
            client, base, "SendMessage", {"message": add_message(), "configuration": config}
        )
        assert (send["error"]["code"], send["error"]["message"]) == (-32602, expected)
        listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert listed["result"].get("configs", []) == []


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def secure_agent() -> AsyncIterator[tuple[str, str]]:
    """One secure-mode agent (and a finished task) for the whole SSRF table."""
    async with (
        push_agent(push_allow_insecure_urls=False) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        yield base, await _completed_task(client, base)


@module_loop
async def test_public_https_url_is_accepted_in_secure_mode(secure_agent: tuple[str, str]) -> None:
    # The task is already finished, so no event is ever sent to this address.
    base, task_id = secure_agent
    async with httpx.AsyncClient(timeout=10, verify=TLS) as client:
        created = await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "pub", "url": "https://93.184.215.14/hook"},
        )
        assert created["result"]["url"] == "https://93.184.215.14/hook"
        await rpc(
            client, base, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "pub"}
        )


async def test_response_shapes_on_json_rpc_and_rest() -> None:
    async with push_agent() as (base, _app), httpx.AsyncClient(timeout=10, verify=TLS) as client:
        task_id = await _completed_task(client, base)
        hook = "http://127.0.0.1:9/hook"
        # 1.0: exactly the standard config (the delivery status is at /push/status).
        created = await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "n1", "url": hook, "token": "t"},
        )
        assert created["result"] == {
            "id": "n1",
            "taskId": task_id,
            "url": hook,
            "token": "t",
        }
        got = await rpc(
            client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "n1"}
        )
        assert got["result"] == created["result"]
        # 0.3 JSON-RPC: exactly the standard {taskId, pushNotificationConfig}.
        old_set = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/set",
            {
                "taskId": task_id,
                "pushNotificationConfig": {"id": "o1", "url": hook + "/old"},
            },
            version="0.3",
        )
        assert old_set["result"] == {
            "taskId": task_id,
            "pushNotificationConfig": {"id": "o1", "url": hook + "/old"},
        }
        old_get = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/get",
            {"id": task_id, "pushNotificationConfigId": "o1"},
            version="0.3",
        )
        assert old_get["result"] == old_set["result"]
        # 0.3 get by task id alone finds the config whose id defaulted to the task id.
        await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": {"url": hook + "/dflt"}},
            version="0.3",
        )
        by_task = await rpc(
            client, base, "tasks/pushNotificationConfig/get", {"id": task_id}, version="0.3"
        )
        assert by_task["result"]["pushNotificationConfig"]["id"] == task_id
        assert by_task["result"]["pushNotificationConfig"]["url"] == hook + "/dflt"
        await rpc(
            client, base, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": task_id}
        )
        old_list = await rpc(
            client, base, "tasks/pushNotificationConfig/list", {"id": task_id}, version="0.3"
        )
        assert sorted(
            (c["taskId"], c["pushNotificationConfig"]["id"], c["pushNotificationConfig"]["url"])
            for c in old_list["result"]
        ) == [(task_id, "n1", hook), (task_id, "o1", hook + "/old")]
        new_list = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert sorted(c["id"] for c in new_list["result"]["configs"]) == ["n1", "o1"]
        # REST 1.0 and the 0.3 REST list.
        rest = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs",
            json={"id": "r1", "url": hook + "/rest"},
            headers=V1,
        )
        assert rest.status_code == 200
        assert rest.json() == {
            "id": "r1",
            "taskId": task_id,
            "url": hook + "/rest",
        }
        rest_get = await client.get(
            f"{base}/tasks/{task_id}/pushNotificationConfigs/r1", headers=V1
        )
        assert rest_get.json() == rest.json()
        assert int(rest_get.headers["content-length"]) == len(rest_get.content)
        # REST 0.3 answers exactly the 0.3 schema: {name, pushNotificationConfig}.
        v1_list = await client.get(f"{base}/v1/tasks/{task_id}/pushNotificationConfigs")
        assert sorted(
            (c["name"], c["pushNotificationConfig"]["id"], sorted(c))
            for c in v1_list.json()["configs"]
        ) == [
            (f"tasks/{task_id}/pushNotificationConfigs/{i}", i, ["name", "pushNotificationConfig"])
            for i in ("n1", "o1", "r1")
        ]
        # Deletes: 0.3 answers null as the 0.3 schema says; 1.0 answers google.protobuf.Empty
        # in ProtoJSON (spec §5.5), {} as REST does (upstream/jsonrpc_empty_result.py).
        old_del = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/delete",
            {"id": task_id, "pushNotificationConfigId": "o1"},
            version="0.3",
        )
        assert "result" in old_del
        assert old_del["result"] is None
        new_del = await rpc(
            client, base, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "n1"}
        )
        assert new_del["result"] == {}
        missing = await rpc(
            client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "n1"}
        )
        assert missing["error"]["code"] == -32001
        # Errors pass through unchanged, on an unknown task too.
        unknown = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/delete",
            {"id": "no-such-task", "pushNotificationConfigId": "x"},
            version="0.3",
        )
        assert unknown["error"]["code"] == -32001
        assert "result" not in unknown
        # Ordinary calls on the same endpoint are untouched by the response rewriting.
        plain = await rpc(client, base, "GetTask", {"id": task_id})
        assert plain["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert "taskId" not in plain["result"]


def _only(card: AgentCard, version: str) -> AgentCard:
    """The card with only the JSON-RPC interface of one protocol version."""
    narrowed = AgentCard()
    narrowed.CopyFrom(card)
    keep = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == "JSONRPC" and i.protocol_version == version
    ]
    del narrowed.supported_interfaces[:]
    narrowed.supported_interfaces.extend(keep)
    return narrowed


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_official_sdk_clients_manage_configs(version: str) -> None:
    methods: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            methods.append(json.loads(request.content).get("method", ""))

    async with (
        push_agent() as (base, _app),
        httpx.AsyncClient(timeout=10, event_hooks={"request": [record]}, verify=TLS) as http,
    ):
        task_id = await _completed_task(http, base)
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(
            _only(card, version)
        )
        hook = "http://127.0.0.1:9/" + version
        config_id = str(uuid.uuid4())
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, id=config_id, url=hook, token="tk")
        )
        assert (created.id, created.task_id, created.url, created.token) == (
            config_id,
            task_id,
            hook,
            "tk",
        )
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        )
        assert got.url == hook
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        assert [c.id for c in listed.configs] == [config_id]
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        assert list(listed.configs) == []
        expected = (
            ["CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig"]
            if version == "1.0"
            else ["tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get"]
        )
        assert methods[1:3] == expected
