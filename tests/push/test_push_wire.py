"""Push-config answers carry only what A2A defines; the delivery status is the owner's, at
``GET /push/status/{task_id}`` (docs/push.md, "Delivery status").

Every binding and version answers create, get and list with exactly the members of the A2A
schema (1.0: the proto ``TaskPushNotificationConfig``; JSON-RPC 0.3: the 0.3 JSON types;
REST 0.3: the 0.3 proto); a strict proto-JSON peer rejects any other. The status route
passes the same admission as an A2A call and shows a task's configs to its owner only.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import types as types_v03
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from google.protobuf.descriptor import Descriptor
from pydantic import BaseModel
from sqlalchemy.exc import OperationalError

from apcore_a2a.client import A2AAuthenticationError, A2AClient, TaskNotFoundError
from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.push import PUSH_STATUS_EXTENSION_URI
from tests._support import TLS

from ._agent import V1, add_message, push_agent, receiver, rpc

V03 = {"A2A-Version": "0.3"}
ENVELOPE = {"jsonrpc", "id", "result"}


def _proto_extra(doc: Any, message: Descriptor, where: str = "") -> list[str]:
    """Members of *doc* that *message* (its proto JSON names) does not define, nested."""
    if not isinstance(doc, dict):
        return [f"{where or '.'}: not an object"]
    fields = {f.json_name: f for f in message.fields}
    extra = [f"{where}.{key}" for key in doc if key not in fields]
    for key, value in doc.items():
        field = fields.get(key)
        if field is None or field.message_type is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            extra += _proto_extra(item, field.message_type, f"{where}.{key}")
    return extra


def _model_extra(doc: Any, model: type[BaseModel], where: str = "") -> list[str]:
    """Members of *doc* that the 0.3 JSON type *model* (by alias) does not define, nested."""
    if not isinstance(doc, dict):
        return [f"{where or '.'}: not an object"]
    fields = {f.alias or name: f for name, f in model.model_fields.items()}
    extra = [f"{where}.{key}" for key in doc if key not in fields]
    for key, value in doc.items():
        field = fields.get(key)
        inner = field.annotation if field is not None else None
        for candidate in getattr(inner, "__args__", (inner,)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                extra += _model_extra(value, candidate, f"{where}.{key}")
    return extra


def _rpc_result(answer: dict[str, Any]) -> Any:
    assert "error" not in answer, answer
    assert set(answer) == ENVELOPE, answer
    return answer["result"]


async def test_config_answers_carry_only_the_members_of_the_a2a_schema() -> None:
    """Before: JSON-RPC 1.0, JSON-RPC 0.3 and REST 1.0 answers gained ``status`` and
    ``statusReason`` (a failed config's too), which no A2A schema has."""
    async with (
        receiver(always={"/dead": 503}) as rec,
        push_agent(push_retry_delays=(0.05,)) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        first = {"id": "dead", "url": rec.url("/dead"), "token": "t"}
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {"message": add_message(), "configuration": {"taskPushNotificationConfig": first}},
        )
        task_id = reply["result"]["task"]["id"]
        await app.state.a2a.extras["push"].sender.idle()
        auth = {"scheme": "Bearer", "credentials": "c"}
        answers: dict[str, list[Any]] = {"1.0": [], "0.3": [], "rest03": []}

        # JSON-RPC 1.0
        created = await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "a", "url": rec.url("/a"), "authentication": auth},
        )
        got = await rpc(
            client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "dead"}
        )
        listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        answers["1.0"] += [_rpc_result(created), _rpc_result(got)]
        list_result = _rpc_result(listed)
        assert (
            _proto_extra(list_result, pb.ListTaskPushNotificationConfigsResponse.DESCRIPTOR) == []
        )
        answers["1.0"] += list_result["configs"]

        # REST 1.0
        path = f"{base}/tasks/{task_id}/pushNotificationConfigs"
        posted = await client.post(path, json={"id": "b", "url": rec.url("/b")}, headers=V1)
        one = await client.get(f"{path}/dead", headers=V1)
        many = await client.get(path, headers=V1)
        for response in (posted, one, many):
            assert response.status_code == 200, response.text
        answers["1.0"] += [posted.json(), one.json()]
        assert (
            _proto_extra(many.json(), pb.ListTaskPushNotificationConfigsResponse.DESCRIPTOR) == []
        )
        answers["1.0"] += many.json()["configs"]

        # JSON-RPC 0.3
        old = {"taskId": task_id, "pushNotificationConfig": {"id": "c", "url": rec.url("/c")}}
        set03 = await rpc(client, base, "tasks/pushNotificationConfig/set", old, version="0.3")
        get03 = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/get",
            {"id": task_id, "pushNotificationConfigId": "dead"},
            version="0.3",
        )
        list03 = await rpc(
            client, base, "tasks/pushNotificationConfig/list", {"id": task_id}, version="0.3"
        )
        answers["0.3"] += [_rpc_result(set03), _rpc_result(get03), *_rpc_result(list03)]

        # REST 0.3
        path03 = f"{base}/v1/tasks/{task_id}/pushNotificationConfigs"
        body03 = {"name": f"tasks/{task_id}/pushNotificationConfigs/d"}
        body03["pushNotificationConfig"] = {"id": "d", "url": rec.url("/d")}  # type: ignore[assignment]
        posted03 = await client.post(path03, json=body03, headers=V03)
        one03 = await client.get(f"{path03}/dead", headers=V03)
        for response in (posted03, one03):
            assert response.status_code == 200, response.text
        answers["rest03"] += [posted03.json(), one03.json()]

    assert len(answers["1.0"]) == 4 + 5, answers["1.0"]
    failed = [a for a in answers["1.0"] if a.get("id") == "dead"]
    assert len(failed) == 4  # the failed config, read four ways: still only A2A's members
    for doc in answers["1.0"]:
        assert _proto_extra(doc, pb.TaskPushNotificationConfig.DESCRIPTOR) == [], doc
    assert len(answers["0.3"]) == 2 + 4
    for doc in answers["0.3"]:
        assert _model_extra(doc, types_v03.TaskPushNotificationConfig) == [], doc
        types_v03.TaskPushNotificationConfig.model_validate(doc)
    for doc in answers["rest03"]:
        assert _proto_extra(doc, pb2_v03.TaskPushNotificationConfig.DESCRIPTOR) == [], doc


async def test_the_status_route_shows_a_failed_config_to_its_owner_only() -> None:
    keys = ("key-a=alice:pusher", "key-b=bob:pusher", "key-c=carol")
    alice, bob, carol = ({"X-API-Key": k} for k in ("key-a", "key-b", "key-c"))
    async with (
        receiver(always={"/dead": 503}) as rec,
        push_agent(push_retry_delays=(0.05,), api_keys=keys, required_roles=("pusher",)) as (
            base,
            app,
        ),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        config = {"id": "dead", "url": rec.url("/dead")}
        reply = await client.post(
            base + "/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": add_message(),
                    "configuration": {"taskPushNotificationConfig": config},
                },
            },
            headers={**V1, **alice},
        )
        task_id = reply.json()["result"]["task"]["id"]
        await app.state.a2a.extras["push"].sender.idle()
        ok = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs",
            json={"id": "ok", "url": rec.url("/ok")},
            headers={**V1, **alice},
        )
        assert ok.status_code == 200, ok.text

        url = f"{base}/push/status/{task_id}"
        mine = await client.get(url, headers=alice)
        assert mine.status_code == 200, mine.text
        assert mine.headers["cache-control"] == "no-store"
        assert mine.json() == {
            "taskId": task_id,
            "configs": [
                {
                    "id": "dead",
                    "url": rec.url("/dead"),
                    "status": "failed",
                    "statusReason": "HTTP 503 (after 2 attempts)",
                },
                {"id": "ok", "url": rec.url("/ok"), "status": "active", "statusReason": None},
            ],
        }
        anonymous = await client.get(url)
        assert anonymous.status_code == 401
        assert "www-authenticate" in anonymous.headers
        assert (await client.get(url, headers={"X-API-Key": "wrong"})).status_code == 401
        assert (await client.get(url, headers=carol)).status_code == 403  # no required role
        others = await client.get(url, headers=bob)
        unknown = await client.get(f"{base}/push/status/{uuid.uuid4()}", headers=alice)
        for refused in (others, unknown):
            assert refused.status_code == 404, refused.text
            details = refused.json()["error"]["details"]
            assert [d["reason"] for d in details] == ["TASK_NOT_FOUND"]
        assert "dead" not in others.text

        # The same through A2AClient: the owner reads it, another owner gets TaskNotFound.
        async with A2AClient(base, headers=alice) as owner:
            card = await owner.agent_card()
            uris = [e["uri"] for e in card["capabilities"]["extensions"]]
            assert PUSH_STATUS_EXTENSION_URI in uris
            assert await owner.push_status(task_id) == mine.json()
            configs = await owner.list_push_configs(task_id)
            assert {c["id"] for c in configs} == {"dead", "ok"}
            assert all("status" not in c and "statusReason" not in c for c in configs)
        async with A2AClient(base, headers=bob) as other:
            with pytest.raises(TaskNotFoundError):
                await other.push_status(task_id)
        async with A2AClient(base) as nobody:
            with pytest.raises(A2AAuthenticationError) as refused_anonymous:
                await nobody.push_status(task_id)
            assert refused_anonymous.value.status_code == 401


async def test_an_agent_without_push_serves_no_status_route() -> None:
    async with (
        push_agent(push_notifications=False) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
        A2AClient(base) as a2a,
    ):
        card = await a2a.agent_card()
        uris = [e["uri"] for e in card["capabilities"].get("extensions", [])]
        assert PUSH_STATUS_EXTENSION_URI not in uris
        assert await a2a.push_status("t-1") is None
        assert (await client.get(f"{base}/push/status/t-1")).status_code == 404


class _UnavailableStore(InMemoryTaskStore):
    """A task store whose reads fail as a store outage does (``storage/outages.py``)."""

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailableError(retry_after=2.0)


async def test_the_status_route_answers_our_errors_as_the_a2a_rest_routes() -> None:
    """A store outage on ``/push/status`` is the A2A routes' 503 with ``Retry-After``, the
    same error body as REST ``GetTask`` (not the SDK's generic 500)."""
    async with (
        push_agent(task_store=_UnavailableStore()) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        status = await client.get(f"{base}/push/status/t-1")
        rest = await client.get(f"{base}/tasks/t-1", headers=V1)
    assert rest.status_code == 503, rest.text  # the A2A route it is held to
    assert status.status_code == 503, status.text
    assert status.headers["retry-after"] == rest.headers["retry-after"] == "2"
    assert status.json() == rest.json()
    assert [d["reason"] for d in status.json()["error"]["details"]] == ["TASK_STORE_UNAVAILABLE"]


class _UnreachableRecords:
    """Status records whose database cannot be reached (the driver's error, unguarded)."""

    async def read(self, task_id: str) -> dict[str, str]:
        raise OperationalError("SELECT", {}, ConnectionRefusedError("connection refused"))


async def test_a_status_book_outage_is_a_store_outage_too() -> None:
    async with push_agent() as (base, app), httpx.AsyncClient(timeout=10, verify=TLS) as client:
        sent = await rpc(client, base, "SendMessage", {"message": add_message()})
        task_id = sent["result"]["task"]["id"]
        created = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs",
            json={"id": "c", "url": "http://127.0.0.1:9/hook"},
            headers=V1,
        )
        assert created.status_code == 200, created.text
        app.state.a2a.extras["push"].statuses.versions = _UnreachableRecords()
        status = await client.get(f"{base}/push/status/{task_id}")
    assert status.status_code == 503, status.text
    assert status.headers["retry-after"] == "2"
    assert [d["reason"] for d in status.json()["error"]["details"]] == ["TASK_STORE_UNAVAILABLE"]
