"""Hostile REST (HTTP+JSON, 1.0 and 0.3): bodies, paths, query strings and verbs."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from . import _report
from ._hostile import Hostile, assert_healthy
from ._oracle import Oracle
from ._strategies import (
    NASTY_STRINGS,
    deep_texts,
    encode,
    header_bytes,
    hostile_text,
    json_values,
    params_for,
    profile,
    scalars,
)

TALLY = _report.tally("hostile: REST")
ORACLE = Oracle(TALLY)

POST_PATHS = (
    "/message:send",
    "/message:stream",
    "/tasks/{id}:cancel",
    "/tasks/{id}/pushNotificationConfigs",
    "/v1/message:send",
    "/v1/tasks/{id}:cancel",
    "/v1/tasks/{id}/pushNotificationConfigs",
    "/{tenant}/message:send",
    "/{tenant}/tasks/{id}:cancel",
)
GET_PATHS = (
    "/tasks/{id}",
    "/tasks",
    "/tasks/{id}/pushNotificationConfigs",
    "/tasks/{id}/pushNotificationConfigs/{id}",
    "/v1/tasks/{id}",
    "/v1/card",
    "/extendedAgentCard",
    "/{tenant}/tasks/{id}",
    "/{tenant}/tasks",
    "/.well-known/agent-card.json",
    "/.well-known/agent.json",
    "/health",
    "/{id}",
    "/{id}/{id}/{id}",
)


_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def _segment() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=30),
        st.sampled_from(NASTY_STRINGS[:-1]),
        st.sampled_from(
            ["..", ".", "%2e%2e", "%00", "%ff", "%c0%af", "a" * 5000, ":cancel", "tasks"]
        ),
    ).map(
        # Percent escapes go as they are (the raw ones sampled above); anything else,
        # a drawn "%\x1f" included, is quoted: httpx refuses control characters in a URL.
        lambda s: (
            s if _ESCAPES.fullmatch(s) else quote(s.encode("utf-8", "surrogatepass"), safe=":@")
        )
    )


def _fill(template: str, segment: str, tenant: str) -> str:
    return template.replace("{id}", segment).replace("{tenant}", tenant)


def _query() -> st.SearchStrategy[dict[str, str]]:
    keys = st.sampled_from(
        [
            "pageSize",
            "pageToken",
            "historyLength",
            "contextId",
            "status",
            "statusTimestampAfter",
            "includeArtifacts",
            "tenant",
            "x",
        ]
    )
    values = st.one_of(
        st.sampled_from(
            [
                "-1",
                "0",
                "101",
                "1e9",
                "abc",
                "true",
                "",
                "2**64",
                "TASK_STATE_WORKING",
                "9999-01-01T00:00:00Z",
            ]
        ),
        st.text(max_size=20),
    )
    return st.dictionaries(
        keys,
        values.map(lambda v: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")),
        max_size=4,
    )


@profile(500)
@given(
    template=st.sampled_from(POST_PATHS),
    segment=_segment(),
    tenant=st.sampled_from(["acme", "%20", "..", "v1", "tasks"]),
    body=st.one_of(
        json_values,
        params_for("SendMessage", []),
        params_for("CreateTaskPushNotificationConfig", []),
    ),
    ascii_only=st.booleans(),
    version=st.one_of(st.none(), header_bytes),
)
def test_post_bodies(
    hostile_agent: Hostile,
    template: str,
    segment: str,
    tenant: str,
    body: Any,
    ascii_only: bool,
    version: bytes | None,
) -> None:
    headers: dict[str, Any] = {"content-type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    response = hostile_agent.http.post(
        _fill(template, segment, tenant), content=encode(body, ascii_only), headers=headers
    )
    ORACLE.check(response)


@profile(250)
@given(
    template=st.sampled_from(POST_PATHS[:3]),
    raw=st.one_of(
        st.binary(max_size=100),
        deep_texts.map(str.encode),
        st.sampled_from(
            [
                b"",
                b"null",
                b"\xef\xbb\xbf{}",
                b'{"message":{}}\x00',
                b'{"a":1,"a":2}',
                b"\xed\xa0\x80",
            ]
        ),
    ),
    content_type=st.sampled_from(
        ["application/json", "application/a2a+json", "application/json; charset=utf-16", None]
    ),
)
def test_post_raw_bytes(
    hostile_agent: Hostile, template: str, raw: bytes, content_type: str | None
) -> None:
    headers = {"A2A-Version": "1.0"}
    if content_type is not None:
        headers["content-type"] = content_type
    response = hostile_agent.http.post(
        _fill(template, "no-such-task", "acme"), content=raw, headers=headers
    )
    ORACLE.check(response)


@profile(1000)
@given(
    template=st.sampled_from(GET_PATHS + POST_PATHS),
    segment=_segment(),
    tenant=_segment(),
    query=_query(),
    verb=st.sampled_from(["GET", "GET", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"]),
)
def test_paths_and_queries(
    hostile_agent: Hostile,
    template: str,
    segment: str,
    tenant: str,
    query: dict[str, str],
    verb: str,
) -> None:
    path = _fill(template, segment or "x", tenant or "t")
    response = hostile_agent.http.request(verb, path, params=query, headers={"A2A-Version": "1.0"})
    ORACLE.check(response)


@profile(150)
@given(task_id=st.one_of(hostile_text(), scalars.map(str)), query=_query())
def test_real_and_fake_task_ids(
    hostile_agent: Hostile, task_id: str, query: dict[str, str]
) -> None:
    """GETs on real task ids with hostile query strings, and hostile ids."""
    for path in (
        f"/tasks/{hostile_agent.task_ids[0]}",
        "/tasks/" + quote(task_id.encode("utf-8", "surrogatepass"), safe=""),
    ):
        if len(path) > 8000:
            path = path[:8000]
        ORACLE.check(hostile_agent.http.get(path, params=query, headers={"A2A-Version": "1.0"}))


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b"null",
        b'{"message":{"messageId":"m","content":[{"text":"x"}],"metadata":{"skillId":"nope"}}}',
    ],
)
def test_v03_rest_stream_rejects_bad_bodies_cleanly(hostile_agent: Hostile, body: bytes) -> None:
    # The SDK alone fails these inside the SSE stream (cut connection after the 200);
    # apcore_a2a.server.rest03 pulls the first event before answering.
    response = hostile_agent.http.post(
        "/v1/message:stream", content=body, headers={"content-type": "application/json"}
    )
    ORACLE.check(response)
    assert response.status_code in (400, 404)
    assert response.json()["error"]["message"]


def test_v03_rest_subscribe_to_unknown_task_is_404(hostile_agent: Hostile) -> None:
    response = hostile_agent.http.get(
        "/v1/tasks/no-such-task:subscribe", headers={"A2A-Version": "0.3"}
    )
    ORACLE.check(response)
    assert response.status_code == 404


def test_agent_still_healthy_after_hostile_rest(hostile_agent: Hostile) -> None:
    assert_healthy(hostile_agent.served, hostile_agent.http)
    assert TALLY.five_xx == 0
