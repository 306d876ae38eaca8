"""A request no route takes gets an A2A error, not Starlette's plain text, on every A2A
path (``server/unrouted.py``): REST the ``google.rpc.Status`` object of spec §11.6, the
JSON-RPC path the JSON-RPC error object of §9.5; the status and ``Allow`` stay HTTP's.
The Explorer and the ops routes, and a host app the agent is mounted in, keep theirs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest
from a2a.utils.errors import A2AError, MethodNotFoundError

from apcore_a2a import A2AServerFactory
from tests._sdk import peer_http
from tests._support import TLS, free_port, threaded_server
from tests.bindings._agent import MOUNT_PATH, host_app
from tests.foundation.modules import build_registry

#: (HTTP method, path) -> (status, Allow) for requests no route of the agent takes
REST_MISSES = {
    ("GET", "/a/b/c/d"): (404, None),
    ("POST", "/tenant/extra/message:send"): (404, None),
    ("GET", "/v1/nowhere"): (404, None),
    ("GET", "/v1/tasks/t-1/unknown"): (404, None),
    ("DELETE", "/tasks"): (405, "GET, HEAD"),
    ("PUT", "/message:send"): (405, "POST"),
    ("GET", "/message:send"): (405, "POST"),
    ("DELETE", "/v1/message:send"): (405, "POST"),
    # the card's route answers another method (the SDK's /{tenant} mount no longer takes
    # it first: upstream/exact_mounts.py)
    ("POST", "/.well-known/agent-card.json"): (405, "GET, HEAD"),
    ("POST", "/message:sendx"): (404, None),  # not a 307 to /message:sendx/
}
VERSIONS = {"1.0": {"A2A-Version": "1.0"}, "0.3": {}}


def _methods(allow: str | None) -> set[str]:
    """The methods an ``Allow`` header names (Starlette lists them in set order)."""
    return {m.strip() for m in (allow or "").split(",") if m.strip()}


def rest_error(status: int) -> dict[str, Any]:
    """The §11.6 error object the agent answers for *status* (reason ``METHOD_NOT_FOUND``,
    as a2a-sdk answers a REST method it does not serve)."""
    code, message = {404: ("NOT_FOUND", "Not Found"), 405: ("UNIMPLEMENTED", "Method Not Allowed")}[
        status
    ]
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "METHOD_NOT_FOUND",
        "domain": "a2a-protocol.org",
        "metadata": {},
    }
    return {"error": {"code": status, "status": code, "message": message, "details": [info]}}


@pytest.fixture(scope="module", params=["root", "starlette"])
def agent_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The agent with its Explorer, on its own and mounted at /agent in a Starlette app."""
    port = free_port()
    settings = {"environ": {}, "port": port, "explorer": True}
    app, _ = A2AServerFactory(build_registry(), **settings).create()
    with threaded_server(host_app(request.param, app), port=port) as url:
        yield url if request.param == "root" else url + MOUNT_PATH


@pytest.mark.parametrize("version", VERSIONS)
def test_rest_paths_answer_the_status_error_object(agent_url: str, version: str) -> None:
    with httpx.Client(
        base_url=agent_url, headers=VERSIONS[version], timeout=30, verify=TLS
    ) as http:
        for (verb, path), (status, allow) in REST_MISSES.items():
            answer = http.request(verb, path)
            where = f"{verb} {path} ({version})"
            assert answer.status_code == status, where
            assert answer.headers["content-type"] == "application/json", where
            assert _methods(answer.headers.get("allow")) == _methods(allow), where
            assert answer.json() == rest_error(status), where


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("verb", ["GET", "PUT", "DELETE", "PATCH"])
def test_the_jsonrpc_path_answers_a_jsonrpc_error_to_other_methods(
    agent_url: str, version: str, verb: str
) -> None:
    answer = httpx.request(verb, agent_url + "/", headers=VERSIONS[version], timeout=30, verify=TLS)
    assert (answer.status_code, answer.headers["allow"]) == (405, "POST")
    assert answer.headers["content-type"] == "application/json"
    message = "Invalid Request: a JSON-RPC call is an HTTP POST"
    error = {"code": -32600, "message": message}
    assert answer.json() == {"jsonrpc": "2.0", "id": None, "error": error}


def test_the_version_parameter_is_read_like_the_header(agent_url: str) -> None:
    answer = httpx.get(agent_url + "/?A2A-Version=1.0", timeout=30, verify=TLS)
    assert answer.status_code == 405
    assert answer.json()["error"] == {
        "code": -32600,
        "message": "Invalid Request: a JSON-RPC call is an HTTP POST",
    }


def test_explorer_and_ops_routes_keep_starlettes_answers(agent_url: str) -> None:
    missing = httpx.get(agent_url + "/explorer/static/nothing.js", timeout=30, verify=TLS)
    assert (missing.status_code, missing.text) == (404, "Not Found")
    for path in ("/health", "/metrics", "/explorer"):
        wrong = httpx.delete(agent_url + path, timeout=30, verify=TLS)
        assert (wrong.status_code, wrong.text) == (405, "Method Not Allowed"), path
        assert wrong.headers["content-type"].startswith("text/plain"), path


def test_a_host_app_keeps_its_own_answers() -> None:
    port = free_port()
    app, _ = A2AServerFactory(build_registry(), environ={}, port=port).create()
    with threaded_server(host_app("starlette", app), port=port) as url:
        host_miss = httpx.get(url + "/else/where/x", timeout=30, verify=TLS)
        agent_miss = httpx.get(url + MOUNT_PATH + "/else/where/x", timeout=30, verify=TLS)
    assert (host_miss.status_code, host_miss.text) == (404, "Not Found")
    assert agent_miss.json() == rest_error(404)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_the_sdk_rest_client_reads_a_missed_path_as_method_not_found(
    agent_url: str, version: str
) -> None:
    """A REST interface URL the agent does not serve (one segment too deep for a tenant):
    the official client raises ``MethodNotFoundError``, on 1.0 read from the answer's
    ``ErrorInfo`` (with the agent's message); its 0.3 transport reads a 404 by its status
    alone (it looks for a ``type`` member neither SDK's server sends)."""
    async with httpx.AsyncClient(verify=TLS) as http:
        card = await A2ACardResolver(http, agent_url).get_agent_card()
    rest = [i for i in card.supported_interfaces if i.protocol_binding == "HTTP+JSON"]
    wrong = [i for i in rest if i.protocol_version == version]
    wrong[0].url = agent_url + "/one/two"
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(wrong)
    config = ClientConfig(supported_protocol_bindings=["HTTP+JSON"], httpx_client=peer_http())
    client = ClientFactory(config).create(card)
    try:
        with pytest.raises(A2AError) as raised:
            await client.get_task(GetTaskRequest(id="t-1"))
    finally:
        await client.close()
    assert type(raised.value) is MethodNotFoundError, repr(raised.value)
    if version == "1.0":
        assert raised.value.message == "Not Found"
