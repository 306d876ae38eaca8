"""ACL-aware cards and call-time masking on a real server.

``admin.reset`` is allowed only for the ``admin`` role: it must be absent from the public
card and a viewer's extended card, present in an admin's, answered to a viewer exactly
like a skill id that does not exist (-32601, logged at WARNING with the real reason), and
run with the admin's identity.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as p03
from a2a.types import GetExtendedAgentCardRequest, TaskState
from a2a.utils.errors import MethodNotFoundError
from google.protobuf.json_format import MessageToDict

from tests._support import TLS, free_port
from tests.bindings._grpc import failure, rich_status, stubs

from .agent import BINDINGS, message, sdk_client, send, serve_agent
from .keys import HMAC_SECRET, bearer, hs_plain


def as_viewer() -> dict[str, str]:
    """A viewer's credentials, made when used (a token made at import expires mid-suite)."""
    return bearer(hs_plain(sub="vic", roles=["viewer"]))


def as_admin() -> dict[str, str]:
    return bearer(hs_plain(sub="root", roles=["admin"], type="user"))


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with serve_agent(auth_key=HMAC_SECRET, require_auth=False) as url:
        yield url


@pytest.fixture(scope="module")
def open_agent_url() -> Iterator[str]:
    """The same agent without any auth configured."""
    with serve_agent() as url:
        yield url


def skill_ids(card: dict[str, Any]) -> set[str]:
    return {s["id"] for s in card["skills"]}


def schema_entries(card: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for ext in card["capabilities"].get("extensions", []):
        out |= set((ext.get("params") or {}).get("skills", {}))
    return out


async def test_public_card_lists_anonymous_skills_and_security(agent_url: str) -> None:
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
        legacy = (await http.get("/.well-known/agent.json")).json()
    assert skill_ids(card) == {"demo.add", "demo.wait"}
    assert schema_entries(card) == {"demo.add", "demo.wait"}, "no schema of hidden skills"
    assert "admin.reset" not in json.dumps(card)
    assert card["capabilities"]["extendedAgentCard"] is True
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"] == {
        "scheme": "Bearer",
        "bearerFormat": "JWT",
        "description": "JWT in the Authorization header",
    }
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    # 0.3 keys for older clients.
    assert card["supportsAuthenticatedExtendedCard"] is True
    assert card["security"] == [{"bearer": []}]
    assert "admin.reset" not in json.dumps(legacy)
    assert legacy["securitySchemes"]["bearer"]["scheme"] == "Bearer"


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_extended_card_is_computed_per_identity(
    agent_url: str, binding: str, version: str
) -> None:
    seen = {}
    for name, headers in (("viewer", as_viewer()), ("admin", as_admin())):
        async with sdk_client(agent_url, binding, version, headers) as client:
            card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        seen[name] = MessageToDict(card)
    assert skill_ids(seen["viewer"]) == {"demo.add", "demo.wait"}
    assert "admin.reset" not in json.dumps(seen["viewer"])
    assert skill_ids(seen["admin"]) == {"demo.add", "demo.wait", "admin.reset"}
    if version == "1.0":  # the 0.3 card has no extension params to compare
        assert "admin.reset" in schema_entries(seen["admin"])


async def test_legacy_extended_card_path(agent_url: str, open_agent_url: str) -> None:
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        viewer = await http.get("/agent/authenticatedExtendedCard", headers=as_viewer())
        admin = await http.get("/agent/authenticatedExtendedCard", headers=as_admin())
        anonymous = await http.get("/agent/authenticatedExtendedCard")
    assert viewer.status_code == admin.status_code == 200
    assert viewer.headers["cache-control"] == "private, no-cache"
    assert skill_ids(viewer.json()) == {"demo.add", "demo.wait"}
    assert "admin.reset" in skill_ids(admin.json())
    assert anonymous.status_code == 401
    async with httpx.AsyncClient(base_url=open_agent_url, verify=TLS) as http:
        assert (await http.get("/agent/authenticatedExtendedCard")).status_code == 404


async def test_without_auth_the_card_offers_no_extended_card(open_agent_url: str) -> None:
    """What each extended-card call answers then: tests/auth/test_card_matrix.py."""
    async with httpx.AsyncClient(base_url=open_agent_url, verify=TLS) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
    assert card["capabilities"].get("extendedAgentCard", False) is False
    assert "securitySchemes" not in card
    assert "securityRequirements" not in card
    # The ACL still hides what an anonymous caller may not call.
    assert skill_ids(card) == {"demo.add", "demo.wait"}


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_acl_denial_is_masked_and_admin_call_sees_identity(
    agent_url: str, binding: str, version: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with sdk_client(agent_url, binding, version, as_viewer()) as viewer:
        # The denial is masked as an unknown skill.
        with pytest.raises(MethodNotFoundError) as denied:
            await send(viewer, message("admin.reset"))
        assert type(denied.value) is MethodNotFoundError
    denial = [r for r in caplog.records if "ACL denied" in r.getMessage()]
    assert denial and denial[-1].levelno == logging.WARNING
    assert "vic" in denial[-1].getMessage() and "admin.reset" in denial[-1].getMessage()

    async with sdk_client(agent_url, binding, version, as_admin()) as admin:
        task = await send(admin, message("admin.reset"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    data = MessageToDict(task.artifacts[0].parts[0].data)
    assert data == {"id": "root", "type": "user", "roles": ["admin"]}


async def test_masked_denial_on_the_wire(agent_url: str) -> None:
    """A hidden id and an id that does not exist get the same answer, listing only what
    the caller may call."""

    async def ask(skill_id: str) -> Any:
        params = {
            "message": {
                "messageId": "m-1",
                "role": "ROLE_USER",
                "parts": [{"data": {}}],
                "metadata": {"skillId": skill_id},
            }
        }
        async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
            resp = await http.post(
                "/",
                json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params},
                headers={**as_viewer(), "A2A-Version": "1.0"},
            )
        return resp.json()["error"]

    hidden, unknown = await ask("admin.reset"), await ask("admin.resex")
    assert hidden["code"] == unknown["code"] == -32601
    assert hidden["message"] == "Skill not found: admin.reset"
    assert unknown["message"] == "Skill not found: admin.resex"
    assert hidden["data"] == unknown["data"]
    assert "admin.reset" not in json.dumps(hidden["data"])
    assert "acl" not in json.dumps(hidden).lower()


@pytest.mark.parametrize(
    ("method", "version"),
    [("GetExtendedAgentCard", "1.0"), ("agent/getAuthenticatedExtendedCard", "0.3")],
)
async def test_padded_anonymous_extended_card_request_gets_no_card(
    agent_url: str, method: str, version: str
) -> None:
    # However large the body, the request record names the method: refused before routing.
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"pad": "x" * 100_000}}
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        resp = await http.post("/", json=body, headers={"A2A-Version": version})
    assert "skills" not in resp.text
    assert "demo.add" not in resp.text
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"]


@pytest.fixture(scope="module")
def grpc_address() -> Iterator[str]:
    grpc_port = free_port()
    with serve_agent(auth_key=HMAC_SECRET, require_auth=False, grpc_port=grpc_port):
        yield f"127.0.0.1:{grpc_port}"


def message03(skill: str) -> Any:
    request = p03.SendMessageRequest()
    request.request.message_id, request.request.role = "m-1", p03.ROLE_USER
    request.request.content.add().text = "hi"
    request.request.metadata.update({"skillId": skill})
    return request


async def test_acl_denial_is_masked_on_grpc_too(grpc_address: str) -> None:
    """On both gRPC services a viewer (and an anonymous caller) gets for the admin-only
    skill exactly the answer for a skill that does not exist; an admin runs it."""
    answers: dict[tuple[str, str, str], Any] = {}
    async with stubs(grpc_address) as (v1, v03):
        for who, headers in (("viewer", as_viewer()), ("anonymous", {})):
            metadata = [(name.lower(), value) for name, value in headers.items()]
            for skill in ("admin.reset", "admin.missing"):
                calls = {
                    "1.0": v1.SendMessage(message(skill), metadata=metadata),
                    "0.3": v03.SendMessage(message03(skill), metadata=metadata),
                }
                for version, call in calls.items():
                    status = rich_status(await failure(call))
                    answers[who, version, skill] = {
                        **status,
                        "message": status["message"].replace(skill, "<skill>"),
                    }
        for key, answer in answers.items():
            assert answer["code"] == grpc.StatusCode.NOT_FOUND, key
            assert answer == answers[(*key[:2], "admin.missing")], key
        admin = [(name.lower(), value) for name, value in as_admin().items()]
        task = (await v1.SendMessage(message("admin.reset"), metadata=admin)).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    data = MessageToDict(task.artifacts[0].parts[0].data)
    assert data == {"id": "root", "type": "user", "roles": ["admin"]}
