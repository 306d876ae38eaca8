"""Hostile JSON-RPC: envelopes, params, raw bytes, unknown methods and versions.

Oracle (see ``_oracle``): only documented 4xx / JSON-RPC errors, never a 5xx or an
internal error from our code, never a traceback, path or secret; the agent stays healthy.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from . import _report
from ._hostile import JSON, Hostile
from ._oracle import Oracle
from ._strategies import (
    METHODS_03,
    METHODS_10,
    SUBSCRIBE_METHODS,
    deep_texts,
    encode,
    header_bytes,
    json_values,
    params_for,
    profile,
    scalars,
)

TALLY = _report.tally("hostile: JSON-RPC")
ORACLE = Oracle(TALLY)


def _skill_of(body: Any) -> Any:
    try:
        return body["params"]["message"]["metadata"]["skillId"]
    except (KeyError, TypeError):
        return None


def _internal_ok(body: Any, headers: dict[str, Any]) -> bool:
    """Where -32603 is documented rather than a bug.

    * a message-reply skill whose module failed answers -32603 (docs/lifecycle.md);
    * a 0.3 method sent with an explicit A2A-Version header the 0.3 adapter does not
      accept: a2a-sdk reports its -32009 as -32603 because 0.3 has no such code.
    """
    if _skill_of(body) == "rel.quick":
        return True
    method = body.get("method") if isinstance(body, dict) else None
    return method in METHODS_03 and "A2A-Version" in headers


def _post(agent: Hostile, raw: bytes, headers: dict[str, Any], body: Any = None) -> Any:
    response = agent.http.post("/", content=raw, headers=headers)
    return ORACLE.check(response, internal_ok=_internal_ok(body, headers))


@profile(600)
@given(
    body=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "jsonrpc": st.one_of(st.sampled_from(["2.0", "1.0", "2", ""]), scalars),
                "id": st.one_of(st.integers(), st.text(max_size=10), scalars, json_values),
                "method": st.one_of(st.sampled_from(METHODS_10 + METHODS_03), scalars),
                "params": json_values,
            },
        ),
        st.lists(
            st.fixed_dictionaries(
                {
                    "jsonrpc": st.just("2.0"),
                    "id": st.integers(),
                    "method": st.sampled_from(METHODS_10),
                }
            ),
            max_size=3,
        ),
    ),
    version=st.one_of(st.none(), header_bytes),
    ascii_only=st.booleans(),
)
def test_envelopes(
    hostile_agent: Hostile, body: Any, version: bytes | None, ascii_only: bool
) -> None:
    headers: dict[str, Any] = dict(JSON)
    if version is not None:
        headers["A2A-Version"] = version
    if isinstance(body, dict) and body.get("method") in SUBSCRIBE_METHODS:
        body["params"] = {"id": "no-such-task"}
    _post(hostile_agent, encode(body, ascii_only), headers, body)


@st.composite
def _calls(draw: st.DrawFn, task_ids: list[str]) -> dict[str, Any]:
    method = draw(st.sampled_from(METHODS_10 + METHODS_03))
    params = draw(params_for(method, task_ids))
    return {
        "jsonrpc": "2.0",
        "id": draw(st.integers(min_value=0, max_value=2**31)),
        "method": method,
        "params": params,
    }


@profile(600)
@given(data=st.data(), version=st.sampled_from([None, b"1.0", b"0.3"]), ascii_only=st.booleans())
def test_method_params(
    hostile_agent: Hostile, data: st.DataObject, version: bytes | None, ascii_only: bool
) -> None:
    body = data.draw(_calls(hostile_agent.task_ids))
    if body["method"] in SUBSCRIBE_METHODS and body["params"] not in ({}, None):
        # Subscribing to a live task waits for its next event by design; aim at none.
        body["params"] = (
            {"id": "no-such-task"} if isinstance(body["params"], dict) else body["params"]
        )
    headers: dict[str, Any] = dict(JSON)
    if version is not None:
        headers["A2A-Version"] = version
    _post(hostile_agent, encode(body, ascii_only), headers, body)


_VALID = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}'


@profile(400)
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        deep_texts.map(
            lambda text: (
                b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":' + text.encode() + b"}"
            )
        ),
        deep_texts.map(str.encode),
        st.integers(min_value=1, max_value=len(_VALID) - 1).map(lambda n: _VALID[:n]),
        st.tuples(
            st.integers(0, len(_VALID)),
            st.binary(min_size=1, max_size=4).filter(lambda b: not _is_utf8(b)),
        ).map(lambda t: _VALID[: t[0]] + t[1] + _VALID[t[0] :]),
        st.sampled_from(
            [
                b"\xef\xbb\xbf" + _VALID,
                b"\xff\xfe" + _VALID.decode().encode("utf-16-le"),
                _VALID.decode().encode("utf-32"),
                b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\xed\xa0\x80"}}',
                b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":1e999}}',
                b'{"jsonrpc":"2.0","id":1e999,"method":"GetTask"}',
                b'{"jsonrpc":"2.0","id":NaN,"method":"GetTask"}',
                b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"},"id":2}',
                b"null",
                b"",
                b" " * 10_000,
            ]
        ),
    ),
    content_type=st.sampled_from(
        ["application/json", "application/json; charset=latin-1", "application/a2a+json", None]
    ),
)
def test_raw_bytes(hostile_agent: Hostile, raw: bytes, content_type: str | None) -> None:
    headers = {"A2A-Version": "1.0"}
    if content_type is not None:
        headers["content-type"] = content_type
    _post(hostile_agent, raw, headers)


def _holds_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@profile(250)
@given(
    method=st.one_of(
        st.text(max_size=40),
        st.sampled_from(
            [
                "message/explode",
                "sendmessage",
                "SendMessage ",
                "tasks/get/",
                "__init__",
                "../GetTask",
                "GetTask\x00",
            ]
        ),
    ),
    version=st.one_of(st.none(), header_bytes),
    params=st.one_of(st.just({"id": "x"}), json_values),
)
def test_unknown_methods_and_versions(
    hostile_agent: Hostile, method: str, version: bytes | None, params: Any
) -> None:
    assume(method not in METHODS_10 and method not in METHODS_03)
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    headers: dict[str, Any] = dict(JSON)
    if version is not None:
        headers["A2A-Version"] = version
    raw = encode(body, False)
    payload = _post(hostile_agent, raw, headers, body)
    # JSON-RPC 2.0: a body that is not UTF-8 JSON, or whose strings hold a lone surrogate
    # (raw or as a \\u escape; no valid Unicode text has one), is a parse error (-32700,
    # id null); a request whose method is empty or whose params are neither an
    # object nor an array (null counts as absent) is not a valid request (-32600); any
    # other request for a method the agent does not have is -32601, whatever version it
    # names.
    structured = params is None or isinstance(params, (dict, list))
    if not _is_utf8(raw) or _holds_lone_surrogate(body):
        expected = -32700
    elif method == "" or not structured:
        expected = -32600
    else:
        expected = -32601
    assert isinstance(payload, dict), payload
    assert "result" not in payload, payload
    assert payload["error"]["code"] == expected, payload
    assert payload["id"] == (None if expected == -32700 else 7), payload


def test_agent_still_healthy_after_hostile_rpc(hostile_agent: Hostile) -> None:
    from ._hostile import assert_healthy

    assert_healthy(hostile_agent.served, hostile_agent.http)
    assert TALLY.five_xx == 0
