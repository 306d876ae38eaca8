"""Every check holds on every route the app serves (issue 18, point 2).

The routes come from the app's own routing table -- every binding and version, the
tenant-prefixed forms, the 0.3 ``/v1`` forms, push and legacy routes, and the same routes
under a reserved first segment (``/.well-known/...``) -- and every JSON-RPC method is tried
on the JSON-RPC route. Public endpoints (card, JWKS, health, metrics, Explorer) are named
below; every other route must hold each check, so a new route that escapes one fails
here:

* no credentials: 401;
* a POST body that is not JSON (``text/plain``, or no Content-Type):
  ``ContentTypeNotSupportedError`` (JSON-RPC -32005, REST 400);
* a body over ``max_body_bytes``: 413;
* a body that is not UTF-8: ``-32700`` (JSON-RPC) or 400 (REST);
* a stream when the agent is at its stream cap: 503 with ``Retry-After``;
* every error body: at most 500 characters of message, no traceback, path or link.

And none of that depends on how a path is spelled (issue 30): every route, spelled with a
trailing ``%0A``/``%0D``/``%00``/``%20``/``/``, a doubled or dotted slash, ``%2F``, in upper
case, under a tenant, or below the root path of a host app that mounts the agent, either
gets the same checks or reaches no endpoint at all (a 404/405, or a redirect).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from apcore_a2a import A2AServerFactory
from apcore_a2a.classify import JSONRPC_METHODS
from tests._support import TLS, threaded_server
from tests.foundation.modules import build_registry

KEY = {"X-API-Key": "route-checks-key"}
MAX_BODY = 2000
#: what the agent serves publicly on purpose (not A2A calls)
PUBLIC = {
    "/.well-known/agent-card.json",
    "/.well-known/agent.json",
    "/.well-known/jwks.json",
    "/health",
    "/metrics",
}
EXPLORER = "/explorer"
STREAMING = {"SendStreamingMessage", "SubscribeToTask"}
_PARAMS = {"id": "t-1", "push_id": "p-1", "tenant": "acme", "task_id": "t-1"}
_LEAKS = re.compile(r"Traceback|File \"|/work/|/usr/|site-packages|https?://", re.I)


def _concrete(template: str) -> str:
    return re.sub(r"{(\w+)(?::\w+)?}", lambda m: _PARAMS[m.group(1)], template)


def _table(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(HTTP method, path template) of every route in a Starlette routing table."""
    for route in routes:
        if isinstance(route, Mount):
            yield from _table(route.routes, prefix + route.path)
        elif isinstance(route, Route):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    yield method, prefix + route.path


def a2a_routes(app: Any) -> list[tuple[str, str]]:
    """Every A2A route of *app*, concrete, plus the tenant forms under a reserved segment."""
    found: set[tuple[str, str]] = set()
    for method, template in _table(app.routes):
        if template in PUBLIC or template.startswith(EXPLORER):
            continue
        found.add((method, _concrete(template)))
        if template.startswith("/{tenant}/"):
            found.add((method, "/.well-known" + _concrete(template)[len("/acme") :]))
    return sorted(found)


def _app() -> Any:
    app, _card = A2AServerFactory(
        build_registry(),
        environ={},
        api_keys=("route-checks-key",),
        max_body_bytes=MAX_BODY,
        max_streams=0,
        push_notifications=True,
        push_allow_insecure_urls=True,
        explorer=True,
    ).create()
    return app


@pytest.fixture(scope="module")
def agent() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    app = _app()
    with threaded_server(app) as url:
        yield url, a2a_routes(app)


@pytest.fixture(scope="module")
def mounted() -> Iterator[str]:
    """The agent mounted by a host app at ``/agent``: the base URL of the host."""
    with threaded_server(Starlette(routes=[Mount("/agent", app=_app())])) as url:
        yield url


def _assert_clean(response: httpx.Response) -> None:
    if response.headers.get("content-type", "").startswith("application/json"):
        error = response.json().get("error") if isinstance(response.json(), dict) else None
        if isinstance(error, dict):
            message = str(error.get("message", ""))
            assert len(message) <= 500, message[:200]
            assert not _LEAKS.search(json.dumps(error)), error


def _content_type_refused(status: int, content: bytes) -> bool:
    """A2A 1.0.1's answer: a JSON-RPC error object -32005 (HTTP 200) or REST 400."""
    if status == 200:
        return b'"code":-32005' in content.replace(b" ", b"")
    return status == 400 and b"CONTENT_TYPE_NOT_SUPPORTED" in content


def _version(path: str, rpc_method: str | None) -> dict[str, str]:
    """The ``A2A-Version`` header of the protocol the route or method speaks."""
    legacy = (JSONRPC_METHODS[rpc_method][1] if rpc_method else "") == "0.3"
    legacy = legacy or "/v1/" in path + "/" or "/agent/" in path
    return {"A2A-Version": "0.3" if legacy else "1.0"}


def _rpc(method: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": {}}).encode()


def _cases(routes: list[tuple[str, str]]) -> Iterator[tuple[str, str, str | None]]:
    """(HTTP method, path, JSON-RPC method or None) for every route (and RPC method)."""
    for method, path in routes:
        if method == "POST" and path == "/":
            for rpc_method in sorted(JSONRPC_METHODS):
                yield method, path, rpc_method
        else:
            yield method, path, None


def _streams(path: str, rpc_method: str | None) -> bool:
    if rpc_method is not None:
        return JSONRPC_METHODS[rpc_method][0] in STREAMING
    return path.endswith((":stream", ":subscribe"))


async def test_the_routing_table_is_covered(agent: tuple[str, list[tuple[str, str]]]) -> None:
    _url, routes = agent
    paths = {path for _method, path in routes}
    # Every binding and version is in the table: a new route factory would add more.
    for expected in ("/", "/message:send", "/acme/message:send", "/v1/message:send"):
        assert expected in paths, expected
    assert "/.well-known/message:stream" in paths
    assert "/push/status/t-1" in paths  # the owner's push status: checked like A2A calls
    assert len(routes) >= 40


async def test_every_route_needs_credentials(agent: tuple[str, list[tuple[str, str]]]) -> None:
    url, routes = agent
    async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
        for method, path, rpc_method in _cases(routes):
            body = _rpc(rpc_method) if rpc_method else b"{}"
            response = await http.request(
                method, path, content=body, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 401, (method, path, rpc_method)


async def test_every_post_route_refuses_bodies_that_are_not_json(
    agent: tuple[str, list[tuple[str, str]]],
) -> None:
    url, routes = agent
    async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
        for method, path, rpc_method in _cases(routes):
            if method != "POST":
                continue
            body = _rpc(rpc_method) if rpc_method else b"{}"
            for headers in ({"Content-Type": "text/plain"}, {}):
                response = await http.post(path, content=body, headers={**KEY, **headers})
                refused = _content_type_refused(response.status_code, response.content)
                assert refused, (path, rpc_method, headers, response.status_code)
                _assert_clean(response)


async def test_every_post_route_refuses_large_and_non_utf8_bodies(
    agent: tuple[str, list[tuple[str, str]]],
) -> None:
    url, routes = agent
    json_type = {**KEY, "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
        for method, path, rpc_method in _cases(routes):
            if method != "POST":
                continue
            big = b'{"pad": "' + b"x" * (MAX_BODY * 3) + b'"}'
            response = await http.post(path, content=big, headers=json_type)
            assert response.status_code == 413, (path, rpc_method)
            _assert_clean(response)
            bad = b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}'
            response = await http.post(path, content=bad, headers=json_type)
            if path == "/":
                assert response.json()["error"]["code"] == -32700, (path, rpc_method)
            else:
                assert response.status_code == 400, (path, rpc_method)
            _assert_clean(response)


async def test_every_stream_route_honours_the_stream_cap(
    agent: tuple[str, list[tuple[str, str]]],
) -> None:
    url, routes = agent
    json_type = {**KEY, "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
        checked = 0
        for method, path, rpc_method in _cases(routes):
            if not _streams(path, rpc_method):
                continue
            body = _rpc(rpc_method) if rpc_method else b"{}"
            headers = {**json_type, **_version(path, rpc_method)}
            response = await http.request(method, path, content=body, headers=headers)
            assert response.status_code == 503, (method, path, rpc_method)
            assert response.headers["retry-after"] == "5"
            _assert_clean(response)
            checked += 1
        assert checked >= 10


async def test_every_error_is_clean(agent: tuple[str, list[tuple[str, str]]]) -> None:
    url, routes = agent
    json_type = {**KEY, "Content-Type": "application/json", "A2A-Version": "1.0"}
    # Bodies the SDK rejects with its own texts: wrong types, unknown enum names, junk ids.
    junk = {
        "id": "/etc/passwd",
        "message": {"role": "ROLE_NOPE", "parts": 5, "messageId": ["x"]},
        "params": {"message": {"parts": "x"}, "id": {"nested": True}},
    }
    async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
        for method, path, rpc_method in _cases(routes):
            if rpc_method is not None:
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": 1, "method": rpc_method, "params": junk}
                ).encode()
            else:
                body = json.dumps(junk).encode()
            response = await http.request(method, path, content=body, headers=json_type)
            assert response.status_code != 500 or "Internal error" in response.text
            _assert_clean(response)


def _spellings(path: str) -> Iterator[str]:
    """*path* spelled as a router (ours, a proxy's, a browser's) might or might not read it."""
    for suffix in ("%0A", "%0D", "%00", "%20", "%0D%0A", "/", "%0A/"):
        yield path + suffix
    yield "/" + path
    yield "/." + path
    yield path.replace("/", "%2F", 2).replace("%2F", "/", 1)
    yield path.upper()
    if not path.startswith(("/acme/", "/.well-known/")):
        yield "/acme" + path


def _unrouted(response: httpcore.Response) -> bool:
    """No route took it (a 404 or 405: Starlette's text, or on an A2A path the A2A error
    of ``server/unrouted.py``) or a redirect to another path. The guard's own 404 for an
    A2A route under a reserved segment reads the same, but comes after every check."""
    if 300 <= response.status < 400:
        return True
    if response.status not in (404, 405):
        return False
    if response.content in (b"Not Found", b"Method Not Allowed"):
        return True
    try:
        error = json.loads(response.content).get("error")
    except (ValueError, AttributeError):
        return False
    if not isinstance(error, dict):
        return False
    reasons = [d.get("reason") for d in error.get("details") or ()]
    return reasons == ["METHOD_NOT_FOUND"] or error.get("code") == -32600


async def _send(
    pool: httpcore.AsyncConnectionPool,
    base: str,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
) -> httpcore.Response:
    """A request with *path* sent exactly as written (httpx would normalize it)."""
    origin = httpx.URL(base)
    url = httpcore.URL(scheme=b"http", host=origin.host, port=origin.port, target=path)
    return await pool.request(
        method,
        url,
        headers=[("Host", origin.netloc.decode()), *headers.items()],
        content=body,
        extensions={"timeout": {"connect": 5, "read": 10, "write": 10, "pool": 10}},
    )


@pytest.mark.parametrize("root", ["", "/agent"])
async def test_no_spelling_of_a_route_escapes_the_checks(
    agent: tuple[str, list[tuple[str, str]]], mounted: str, root: str
) -> None:
    url, routes = agent
    base = mounted if root else url
    json_type = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    big = b'{"pad": "' + b"x" * (MAX_BODY * 3) + b'"}'
    reached = 0
    escaped: list[tuple[Any, ...]] = []
    async with httpcore.AsyncConnectionPool() as pool:
        for method, route in routes:
            rpc = _rpc("SendStreamingMessage") if route == "/" else b"{}"
            streams = route == "/" or route.endswith((":stream", ":subscribe"))
            for spelled in _spellings(route):
                path = root + spelled
                # (what to send, the answer the checks give)
                checks: list[tuple[bytes, dict[str, str], int]] = [(rpc, json_type, 401)]
                if method == "POST":
                    # 415 stands for ContentTypeNotSupportedError (_content_type_refused)
                    checks.append((rpc, {**KEY, "Content-Type": "text/plain"}, 415))
                    checks.append((big, {**KEY, **json_type}, 413))
                if streams:
                    checks.append((rpc, {**KEY, **json_type}, 503))
                for body, headers, status in checks:
                    response = await _send(pool, base, method, path, body, headers)
                    where = (method, path, status, response.status, response.content[:40])
                    if status == 503:
                        # A spelling may reach another route (GET /tasks/{id} with the id
                        # "t-1:subscribe\r"); what must not happen is a stream over the cap.
                        kind = dict(response.headers).get(b"content-type", b"")
                        if kind.startswith(b"text/event-stream"):
                            escaped.append(where)
                    elif status == 415:
                        refused = _content_type_refused(response.status, response.content)
                        if not refused and not _unrouted(response):
                            escaped.append(where)
                        reached += refused
                        continue
                    elif response.status != status and not _unrouted(response):
                        escaped.append(where)
                    reached += response.status == status
    # Endpoints that answered (2xx) first: those are the escapes that matter most.
    assert not escaped, sorted(escaped, key=lambda w: w[3] >= 300)[:4]
    assert reached > 100  # many spellings do reach the routes: they are checked there
