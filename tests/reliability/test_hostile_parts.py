"""Parts against module schemas, generated from the schemas the agent card publishes.

Valid instances (generated from the card's ``inputSchema``) must run and give
the right answer; mutated ones must get -32602 naming the problem (or, refused by the
module itself once its task exists, a failed task saying so). Either way: no 5xx, no
internal error, no other failed task than the module's that fails on purpose. The
``rel.tree`` skill's schema has a ``$ref`` cycle, which the card shows cut.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._support import TLS

from . import _report
from ._hostile import V1, Hostile, assert_healthy, message, rpc
from ._oracle import Oracle
from ._strategies import encode, from_schema, hostile_text, json_values, profile

TALLY = _report.tally("hostile: Parts vs schemas")
ORACLE = Oracle(TALLY)
SCHEMA_EXTENSION = "urn:apcore:a2a:skill-schemas:v1"
#: invalid params, unsupported content type, an unpaired surrogate (parse error), or a
#: body over max_body_bytes (HTTP 413 with -32600)
PART_ERRORS = (-32602, -32005, -32700, -32600)
#: skills whose valid input runs to completion, and what their answer must be
ANSWERS = {
    "rel.add": lambda i: {"sum": i["a"] + i["b"]},
    "rel.echo": lambda i: {"text": i["text"]},
    "rel.profile": lambda i: {"summary": f"{i['name']} ({i['age']})"},
    "rel.tree": None,  # checked below: the node count
}


def _ints(node: Any) -> Any:
    """Card schemas travel as protobuf Structs (``maxItems: 8.0``); JSON Schema wants ints."""
    if isinstance(node, dict):
        return {k: _ints(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_ints(v) for v in node]
    if isinstance(node, float) and node.is_integer():
        return int(node)
    return node


def card_schemas(url: str) -> dict[str, dict[str, Any]]:
    card = httpx.get(url + "/.well-known/agent-card.json", timeout=10, verify=TLS).json()
    for ext in card["capabilities"]["extensions"]:
        if ext["uri"] == SCHEMA_EXTENSION:
            return {k: _ints(v["inputSchema"]) for k, v in ext["params"]["skills"].items()}
    raise AssertionError("card has no skill-schema extension")


@pytest.fixture(scope="module")
def schemas(hostile_agent: Hostile) -> dict[str, dict[str, Any]]:
    return card_schemas(hostile_agent.served.url)


def _count(node: dict[str, Any]) -> int:
    return 1 + sum(_count(c) for c in node.get("children", []) if isinstance(c, dict))


def _send(agent: Hostile, skill: str, parts: list[dict[str, Any]]) -> Any:
    msg = message(skill)
    msg["parts"] = parts
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": msg}}
    response = agent.http.post(
        "/", content=encode(body, True), headers={**V1, "content-type": "application/json"}
    )
    return ORACLE.check(response, internal_ok=skill == "rel.quick")


def _outcome(payload: Any, skill: str) -> tuple[str, Any]:
    """("error", code) | ("task", (state, output)) | ("message", parts)."""
    if "error" in payload:
        return "error", payload["error"]["code"]
    result = payload["result"]
    if "message" in result:
        return "message", result["message"]["parts"]
    task = result["task"]
    state = task["status"]["state"]
    output = None
    if task.get("artifacts"):
        output = task["artifacts"][0]["parts"][0].get("data")
    if state == "TASK_STATE_FAILED":
        # rel.leak fails on purpose; rel.blob refuses data that is no base64 itself, once
        # its task exists: its task ends failed with its words, as the caller's fault.
        code = task["status"]["message"]["parts"][1]["data"]["code"]
        refused = skill == "rel.blob" and code == "GENERAL_INVALID_INPUT"
        assert skill == "rel.leak" or refused, (
            f"{skill} failed on input that passed validation: {task['status']}"
        )
    return "task", (state, output)


@profile(150)
@given(data=st.data(), skill=st.sampled_from(["rel.add", "rel.echo", "rel.profile", "rel.tree"]))
def test_valid_instances_run_and_answer_right(
    hostile_agent: Hostile, schemas: dict[str, Any], data: st.DataObject, skill: str
) -> None:
    schema = schemas[skill]
    if skill == "rel.tree":
        # The card cuts the cycle at depth one; stay within what it describes exactly.
        schema = json.loads(json.dumps(schema))
        schema["properties"]["root"]["properties"]["children"]["maxItems"] = 0
    if skill == "rel.echo":
        schema = {
            **schema,
            "properties": {"text": {**schema["properties"]["text"], "maxLength": 200}},
        }
    value = data.draw(from_schema(schema), label="input")
    kind, outcome = _outcome(_send(hostile_agent, skill, [{"data": value}]), skill)
    assert kind == "task", outcome
    state, output = outcome
    assert state == "TASK_STATE_COMPLETED"
    expected = {"nodes": _count(value["root"])} if skill == "rel.tree" else ANSWERS[skill](value)  # type: ignore[misc]
    assert output == expected


def _mutations(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    props = list(schema.get("properties", {}))
    valid = from_schema(schema)
    return st.one_of(
        # a field of the wrong type
        st.tuples(valid, st.sampled_from(props), json_values).map(lambda t: {**t[0], t[1]: t[2]}),
        # a required field missing
        valid.map(
            lambda v: {k: x for k, x in v.items() if k not in schema.get("required", [])[:1]}
        ),
        # unknown fields beside valid ones
        st.tuples(valid, st.dictionaries(st.text(max_size=8), json_values, max_size=3)).map(
            lambda t: {**t[1], **t[0]}
        ),
        json_values,
    )


@profile(300)
@given(
    data=st.data(),
    skill=st.sampled_from(
        [
            "rel.add",
            "rel.echo",
            "rel.profile",
            "rel.tree",
            "rel.blob",
            "rel.transfer",
            "rel.leak",
            "rel.quick",
        ]
    ),
)
def test_mutated_data_parts(
    hostile_agent: Hostile, schemas: dict[str, Any], data: st.DataObject, skill: str
) -> None:
    value = data.draw(_mutations(schemas[skill]), label="input")
    kind, outcome = _outcome(_send(hostile_agent, skill, [{"data": value}]), skill)
    if kind == "error":
        assert outcome in PART_ERRORS or (skill == "rel.quick" and outcome == -32603), outcome


def _file_part() -> st.SearchStrategy[dict[str, Any]]:
    raw = st.one_of(
        st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()), hostile_text()
    )
    return st.one_of(
        st.fixed_dictionaries(
            {"raw": raw},
            optional={
                "mediaType": st.sampled_from(
                    ["image/png", "text/plain", "", "a/b/c", "application/octet-stream"]
                ),
                "filename": hostile_text(),
            },
        ),
        st.fixed_dictionaries(
            {
                "url": st.sampled_from(
                    [
                        "https://127.0.0.1/x.png",
                        "file:///etc/passwd",
                        "data:text/plain;base64,aGk=",
                        "not a url",
                    ]
                )
            }
        ),
    )


@profile(250)
@given(
    skill=st.sampled_from(["rel.blob", "rel.echo", "rel.add", "rel.tree", "rel.profile"]),
    parts=st.lists(
        st.one_of(
            _file_part(),
            st.fixed_dictionaries({"text": hostile_text()}),
            st.fixed_dictionaries({"data": json_values}),
            st.fixed_dictionaries(
                {
                    "text": st.sampled_from(
                        [
                            '{"a": 1, "b": 2}',
                            '{"text": 5}',
                            "[1,2]",
                            '{"root": {"value": 1e400}}',
                            "{" * 2000,
                        ]
                    )
                }
            ),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_mixed_parts(hostile_agent: Hostile, skill: str, parts: list[dict[str, Any]]) -> None:
    kind, outcome = _outcome(_send(hostile_agent, skill, parts), skill)
    if kind == "error":
        assert outcome in PART_ERRORS, outcome


def test_blob_file_part_roundtrip(hostile_agent: Hostile) -> None:
    payload = bytes(range(256)) * 4
    kind, outcome = _outcome(
        _send(
            hostile_agent,
            "rel.blob",
            [
                {
                    "raw": base64.b64encode(payload).decode(),
                    "mediaType": "application/octet-stream",
                    "filename": "x.bin",
                }
            ],
        ),
        "rel.blob",
    )
    assert (kind, outcome) == ("task", ("TASK_STATE_COMPLETED", {"size": 1024}))


def test_card_shows_the_cycle_cut_and_deep_trees_are_refused_cleanly(
    hostile_agent: Hostile, schemas: dict[str, Any]
) -> None:
    children = schemas["rel.tree"]["properties"]["root"]["properties"]["children"]
    assert "recursive reference" in children["items"]["description"]
    deep = '{"value":1}'
    for _ in range(150):
        deep = '{"value":1,"children":[' + deep + "]}"
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"root":'
        + deep
        + '}}],"metadata":{"skillId":"rel.tree"}}}}'
    )
    payload = ORACLE.check(
        hostile_agent.http.post(
            "/", content=body.encode(), headers={**V1, "content-type": "application/json"}
        )
    )
    assert payload["error"]["code"] == -32602  # protobuf's Struct depth limit (100)


def test_nested_integers_below_a_ref_cycle_are_accepted(hostile_agent: Hostile) -> None:
    tree = {"root": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}}
    reply = rpc(hostile_agent.http, "SendMessage", {"message": message("rel.tree", tree)}).json()
    assert reply["result"]["task"]["artifacts"][0]["parts"] == [{"data": {"nodes": 3}}]


def test_agent_still_healthy_after_hostile_parts(hostile_agent: Hostile) -> None:
    assert_healthy(hostile_agent.served, hostile_agent.http)
    assert TALLY.five_xx == 0
