"""How the agent reads a path's spelling (A2A 1.0.1 §11: the HTTP+JSON paths are exact).

A typo of an A2A path, or a real route with a trailing slash, is one A2A 404 (the
``google.rpc.Status`` object of ``server/unrouted.py``), never a redirect: a client does
not follow a 307 for a ``POST``. The card and ops paths answer another method with 405 and
their ``Allow``. Percent-encoded and doubled spellings, and a tenant segment with odd
characters, are served as the route they name or answered 404: never a 500, never another
caller's task. Every path is sent exactly as written (httpx would normalize it), on the
agent alone and mounted at ``/agent`` in a Starlette host, in 1.0 and 0.3.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx
import pytest

from apcore_a2a import A2AServerFactory
from tests._support import free_port, threaded_server
from tests.bindings._agent import MOUNT_PATH, host_app
from tests.foundation.modules import build_registry
from tests.foundation.test_unrouted import rest_error

KEYS = {"alice": "alice-" + secrets.token_hex(16), "bob": "bob-" + secrets.token_hex(16)}
VERSIONS = {"1.0": {"A2A-Version": "1.0"}, "0.3": {}}
#: one segment no route has: the SDK's ``/{tenant}`` mount takes ``/x/``, a 307 away
TYPOS = [
    ("POST", "/message:sendx"),
    ("POST", "/foo"),
    ("GET", "/foo"),
    ("GET", "/taskz"),
    ("POST", "/v1"),
    ("POST", "/%20"),
    ("POST", "/acme/message:sendx"),
    ("GET", "/v1/taskz"),
]
#: a real route (JSON-RPC, REST 1.0 with and without a tenant, REST 0.3) with one slash more
SLASHED = [
    ("POST", "//"),
    ("POST", "/message:send/"),
    ("GET", "/tasks/"),
    ("GET", "/tasks/t-1/"),
    ("POST", "/acme/message:send/"),
    ("GET", "/acme/tasks/"),
    ("POST", "/v1/message:send/"),
    ("GET", "/v1/tasks/t-1/"),
    ("POST", "/x/"),
    ("GET", "/health/"),
    ("GET", "/.well-known/agent-card.json/"),
]
#: card and ops paths with a method they do not take: 405, ``Allow: GET, HEAD``
WRONG_METHOD = [
    ("POST", "/.well-known/agent-card.json"),
    ("PUT", "/.well-known/agent-card.json"),
    ("DELETE", "/.well-known/agent-card.json"),
    ("POST", "/.well-known/agent.json"),
    ("POST", "/health"),
    ("POST", "/metrics"),
]
#: spellings of no route: dot segments, a decoded ``%2F``, a doubled slash
NO_ROUTE = [
    ("GET", "/tasks/%2e%2e/x"),
    ("GET", "/tasks/../tasks"),
    ("POST", "//message:send"),
    ("GET", "/a%2Fb/tasks"),
    ("POST", "/message:send%2F"),
]
#: tenant segments with odd characters (the owner, not the tenant, separates tasks)
ODD_TENANTS = ["%2e%2e", "%2e", "t%00", "%20", "%C3%A9", "%FF", "a%3Bb", "%3Fq", "%23"]


@pytest.fixture(scope="module", params=["root", "starlette"])
def agent_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """Two callers' agent with its Explorer, alone and mounted at /agent in a Starlette app."""
    port = free_port()
    keys = tuple(f"{key}={who}" for who, key in KEYS.items())
    settings = {"environ": {}, "port": port, "explorer": True, "api_keys": keys}
    app, _ = A2AServerFactory(build_registry(), **settings).create()
    with threaded_server(host_app(request.param, app), port=port) as url:
        yield url if request.param == "root" else url + MOUNT_PATH


def send(
    base: str, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, dict[str, str], Any]:
    """``(status, headers, JSON body or text)`` of *path* sent exactly as written."""
    origin = httpx.URL(base)
    target = (origin.raw_path.rstrip(b"/") + path.encode()) if path else origin.raw_path
    url = httpcore.URL(scheme=b"http", host=origin.host, port=origin.port, target=target)
    content = b"" if body is None else json.dumps(body).encode()
    sent = {"Host": origin.netloc.decode(), "X-API-Key": KEYS["alice"], **headers}
    if body is not None:
        sent["Content-Type"] = "application/json"
    with httpcore.ConnectionPool() as pool:
        answer = pool.request(method, url, headers=list(sent.items()), content=content)
    found = {k.decode().lower(): v.decode() for k, v in answer.headers}
    text = answer.content.decode("utf-8", "replace")
    try:
        return answer.status, found, json.loads(text)
    except ValueError:
        return answer.status, found, text


def _message() -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 2, "b": 3}}],
        "metadata": {"skillId": "math.add"},
    }


def _methods(allow: str | None) -> set[str]:
    return {m.strip() for m in (allow or "").split(",") if m.strip()}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_typo_is_one_a2a_404_not_a_redirect(agent_url: str, version: str) -> None:
    for verb, path in TYPOS:
        status, headers, body = send(agent_url, verb, path, {}, **VERSIONS[version])
        where = f"{verb} {path} ({version})"
        assert (status, headers.get("location")) == (404, None), where
        assert body == rest_error(404), where


@pytest.mark.parametrize("version", VERSIONS)
def test_a_route_with_a_trailing_slash_is_one_a2a_404(agent_url: str, version: str) -> None:
    for verb, path in SLASHED:
        status, headers, body = send(agent_url, verb, path, {}, **VERSIONS[version])
        where = f"{verb} {path} ({version})"
        assert (status, headers.get("location")) == (404, None), where
        assert body == rest_error(404), where


@pytest.mark.parametrize("version", VERSIONS)
def test_card_and_ops_paths_answer_another_method_405(agent_url: str, version: str) -> None:
    for verb, path in WRONG_METHOD:
        status, headers, body = send(agent_url, verb, path, {}, **VERSIONS[version])
        where = f"{verb} {path} ({version})"
        assert status == 405, (where, body)
        assert _methods(headers.get("allow")) == {"GET", "HEAD"}, where
        if path.startswith("/.well-known/"):  # the card is A2A's (§8.2): its error object
            assert body == rest_error(405), where
        else:  # ops routes keep Starlette's answer (server/unrouted.py)
            assert body == "Method Not Allowed", where
    # the method the card does take still serves it
    status, _, card = send(agent_url, "GET", "/.well-known/agent-card.json")
    assert status == 200 and card["skills"], card


@pytest.mark.parametrize("version", VERSIONS)
def test_spellings_of_no_route_are_one_a2a_404(agent_url: str, version: str) -> None:
    for verb, path in NO_ROUTE:
        body = {"message": _message()} if verb == "POST" else None
        status, headers, answer = send(agent_url, verb, path, body, **VERSIONS[version])
        where = f"{verb} {path} ({version})"
        assert (status, headers.get("location")) == (404, None), where
        assert answer == rest_error(404), where


def test_a_percent_encoded_colon_is_the_route_it_names(agent_url: str) -> None:
    """uvicorn decodes ``%3A`` before routing: ``/message%3Asend`` is ``SendMessage``, with
    its checks (1.0; 0.3 without the header)."""
    sent = {"message": _message()}
    status, _, body = send(agent_url, "POST", "/message%3Asend", sent, **{"A2A-Version": "1.0"})
    assert status == 200, body
    assert body["task"]["status"]["state"] == "TASK_STATE_COMPLETED", body
    status, _, body = send(agent_url, "GET", "/tasks/%2e%2e", **{"A2A-Version": "1.0"})
    assert status == 404, body  # GetTask of the task ".." (none)
    assert body["error"]["details"][0]["reason"] == "TASK_NOT_FOUND", body


def test_an_odd_tenant_is_a_tenant_and_never_shows_another_callers_task(
    agent_url: str,
) -> None:
    v1 = {"A2A-Version": "1.0"}
    status, _, created = send(agent_url, "POST", "/message:send", {"message": _message()}, **v1)
    assert status == 200, created
    task_id = created["task"]["id"]
    bob = {**v1, "X-API-Key": KEYS["bob"]}
    for tenant in ODD_TENANTS:
        status, _, mine = send(agent_url, "GET", f"/{tenant}/tasks/{task_id}", **v1)
        assert (status, mine.get("id")) == (200, task_id), (tenant, mine)
        status, _, theirs = send(agent_url, "GET", f"/{tenant}/tasks/{task_id}", **bob)
        assert status == 404, (tenant, theirs)
        assert theirs["error"]["details"][0]["reason"] == "TASK_NOT_FOUND", (tenant, theirs)
        status, _, listed = send(agent_url, "GET", f"/{tenant}/tasks", **bob)
        assert status == 200, (tenant, listed)
        assert task_id not in {t["id"] for t in listed.get("tasks", [])}, tenant
        status, _, sent = send(
            agent_url, "POST", f"/{tenant}/message:send", {"message": _message()}, **bob
        )
        assert status == 200, (tenant, sent)
        assert sent["task"]["status"]["state"] == "TASK_STATE_COMPLETED", (tenant, sent)


@pytest.mark.parametrize("host", ["root", "starlette"])
def test_a_jsonrpc_path_of_its_own_is_exact_too(host: str) -> None:
    """``rpc_path="/rpc"``: its typo and its trailing-slash spelling are one A2A 404 (the
    typo was a 307 to ``/rpcx/``); ``/rpc`` itself serves JSON-RPC, in both versions."""
    port = free_port()
    keys = (f"{KEYS['alice']}=alice",)
    app, _ = A2AServerFactory(
        build_registry(), environ={}, port=port, rpc_path="/rpc", api_keys=keys
    ).create()
    calls = {"1.0": "ListTasks", "0.3": "tasks/get"}
    with threaded_server(host_app(host, app), port=port) as url:
        base = url if host == "root" else url + MOUNT_PATH
        for version, headers in VERSIONS.items():
            call = {"jsonrpc": "2.0", "id": 1, "method": calls[version], "params": {}}
            for path in ("/rpcx", "/rpc/", "/rpc//"):
                status, found, body = send(base, "POST", path, call, **headers)
                where = f"{path} ({version})"
                assert (status, found.get("location")) == (404, None), where
                assert body == rest_error(404), where
            status, _, body = send(base, "POST", "/rpc", call, **headers)
            assert (status, body["id"]) == (200, 1), (version, body)
            if version == "1.0":
                assert body["result"]["tasks"] == [], body
            else:  # served as 0.3's tasks/get, which needs the task's id
                assert body["error"]["code"] == -32602, body
