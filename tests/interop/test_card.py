"""The agent card on the wire: CARD-STRUCT-001 and CARD-CACHE-003 (issue 19, item 6).

A client announcing A2A 1.0 gets a card that is valid against the 1.0 ``AgentCard``
schema (the proto, strictly: no unknown member, every REQUIRED field present); a client
without a version (the spec reads it as 0.3) keeps the 0.3 keys it needs. The card answers
``If-Modified-Since`` like ``If-None-Match``.
"""

from __future__ import annotations

import time
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import types as types03
from a2a.types import AgentCard
from apcore import Registry
from google.api import field_behavior_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.json_format import ParseDict, ParseError

from apcore_a2a.adapters.agent_card import AgentCardBuilder, Binding
from apcore_a2a.execution.catalog import SkillCatalog
from tests._modules import Add, Echo
from tests._support import TLS
from tests.interop._runs import Target

CARD = "/.well-known/agent-card.json"
A2A_PACKAGE = AgentCard.DESCRIPTOR.full_name.rsplit(".", 1)[0] + "."


def _get(agent: Target, headers: dict[str, str] | None = None, **params: str) -> httpx.Response:
    return httpx.get(agent.url + CARD, headers=headers or {}, params=params, timeout=10, verify=TLS)


def _missing_required(message: Any, descriptor: Descriptor, path: str = "") -> list[str]:
    """REQUIRED fields (google.api.field_behavior) absent anywhere in an A2A *message*."""
    missing = []
    for field in descriptor.fields:
        value = getattr(message, field.name)
        is_message = field.message_type is not None
        repeated = field.is_repeated
        if repeated:
            present = len(value) > 0
        elif is_message:
            present = message.HasField(field.name)
        else:
            present = value not in ("", 0, False)
        behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        if field_behavior_pb2.REQUIRED in behaviors and not present:
            missing.append(path + field.name)
        if is_message and field.message_type.full_name.startswith(A2A_PACKAGE):
            if field.message_type.GetOptions().map_entry:
                items = list(value.values())
            else:
                items = list(value) if repeated else ([value] if present else [])
            for item in items:
                missing += _missing_required(item, item.DESCRIPTOR, f"{path}{field.name}.")
    return missing


def assert_valid_v1_card(document: dict[str, Any]) -> None:
    card = AgentCard()
    ParseDict(document, card)  # strict: any member the 1.0 schema does not have fails here
    assert _missing_required(card, AgentCard.DESCRIPTOR) == []


@pytest.mark.parametrize("version", ["1.0", "1.1", "1", "2.0"])
def test_a_1_0_client_gets_a_valid_1_0_card(interop_agent: Target, version: str) -> None:
    """1.x, and a later major (no 0.3 client: the newest card we know, not refused)."""
    response = _get(interop_agent, {"A2A-Version": version})
    assert response.status_code == 200
    document = response.json()
    assert_valid_v1_card(document)
    for legacy in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces"):
        assert legacy not in document
    assert {i["protocolVersion"] for i in document["supportedInterfaces"]} == {"1.0", "0.3"}


def test_the_version_may_come_as_a_query_parameter(interop_agent: Target) -> None:
    assert_valid_v1_card(_get(interop_agent, **{"A2A-Version": "1.0"}).json())


@pytest.mark.parametrize(
    "version", [None, "0.3", "", "0.2", "garbage"], ids=["none", "0.3", "empty", "0.2", "garbage"]
)
def test_a_client_without_1_0_keeps_the_0_3_keys(
    interop_agent: Target, version: str | None
) -> None:
    """No version, 0.x, or one that names none (the card is discovery, not a call on an
    interface: §3.6.2's ``VersionNotSupportedError`` is not its answer)."""
    headers = {} if version is None else {"A2A-Version": version}
    response = _get(interop_agent, headers)
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["protocolVersion"] == "0.3"
    legacy = types03.AgentCard.model_validate(document)
    transports = {legacy.preferred_transport} | {
        i.transport for i in legacy.additional_interfaces or []
    }
    assert transports == {"JSONRPC", "HTTP+JSON", "GRPC"}
    # the 1.0 members are there too, so a 1.0 client that sends no version still works
    assert len(document["supportedInterfaces"]) == 6


@pytest.mark.parametrize("version", ["", "1.0", "1.1", "2.0", "0.2", "garbage"])
async def test_a_plain_sdk_agent_answers_every_version_with_its_card(version: str) -> None:
    """The a2a-sdk 1.3 card route, alone: every ``A2A-Version`` gets 200 and its one card
    (the 1.0 card with the 0.3 keys), none is refused. Ours refuses none either, and
    differs only in giving a client of 1.0 or later the pure 1.0 card (docs/interop.md)."""
    from a2a.server.routes.agent_card_routes import create_agent_card_routes
    from starlette.applications import Starlette

    from tests._support import running_server

    _registry, catalog = _catalog()
    plain = Starlette(routes=create_agent_card_routes(catalog.snapshot.card))
    async with running_server(plain) as url, httpx.AsyncClient(base_url=url, verify=TLS) as http:
        unversioned = (await http.get(CARD)).json()
        response = await http.get(CARD, headers={"A2A-Version": version})
    assert response.status_code == 200, response.text
    assert response.json() == unversioned
    assert unversioned["protocolVersion"] == "0.3" and "supportedInterfaces" in unversioned


def test_the_two_forms_have_their_own_etag_and_caches_are_told(interop_agent: Target) -> None:
    v1 = _get(interop_agent, {"A2A-Version": "1.0"})
    merged = _get(interop_agent)
    assert v1.headers["etag"] != merged.headers["etag"]
    for response in (v1, merged):
        assert "a2a-version" in response.headers["vary"].lower()
    again = _get(interop_agent, {"A2A-Version": "1.0", "If-None-Match": merged.headers["etag"]})
    assert again.status_code == 200  # the other form's tag does not match this one


def test_last_modified_and_if_modified_since(interop_agent: Target) -> None:
    first = _get(interop_agent)
    stamp = first.headers["last-modified"]
    assert parsedate_to_datetime(stamp).timestamp() <= time.time()
    same = _get(interop_agent, {"If-Modified-Since": stamp})
    assert same.status_code == 304
    assert same.content == b""
    assert same.headers["etag"] == first.headers["etag"]
    later = formatdate(time.time() + 3600, usegmt=True)
    assert _get(interop_agent, {"If-Modified-Since": later}).status_code == 304
    earlier = formatdate(parsedate_to_datetime(stamp).timestamp() - 1, usegmt=True)
    assert _get(interop_agent, {"If-Modified-Since": earlier}).status_code == 200
    assert _get(interop_agent, {"If-Modified-Since": "yesterday-ish"}).status_code == 200
    # If-None-Match wins over If-Modified-Since (RFC 9110 13.2.2)
    both = _get(interop_agent, {"If-None-Match": 'W/"other"', "If-Modified-Since": later})
    assert both.status_code == 200


def _catalog() -> tuple[Registry, SkillCatalog]:
    registry = Registry()
    registry.register("demo.echo", Echo())
    builder = AgentCardBuilder(
        name="t", description=None, version="1", bindings=[Binding("JSONRPC", "http://x/")]
    )
    return registry, SkillCatalog(registry, builder)


def test_a_changed_card_is_modified_in_a_later_second() -> None:
    registry, catalog = _catalog()
    before = catalog.snapshot.document
    registry.register("demo.add", Add())
    after = catalog.rebuild().document
    assert after.etag != before.etag
    assert int(after.last_modified) > int(before.last_modified)


def test_an_unchanged_rebuild_keeps_last_modified() -> None:
    _registry, catalog = _catalog()
    before = catalog.snapshot.document
    assert catalog.rebuild().document.last_modified == before.last_modified


def test_the_validator_rejects_what_the_1_0_schema_does_not_allow(interop_agent: Target) -> None:
    merged = _get(interop_agent).json()
    with pytest.raises(ParseError, match="has no field named"):
        assert_valid_v1_card(merged)
    v1 = _get(interop_agent, {"A2A-Version": "1.0"}).json()
    del v1["name"]
    v1["skills"][0].pop("description")
    card = AgentCard()
    ParseDict(v1, card)
    assert _missing_required(card, AgentCard.DESCRIPTOR) == ["name", "skills.description"]
