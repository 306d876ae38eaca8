"""AuthMiddleware: exempt paths, optional auth, the extended card rule, identity hand-off."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import jwt
import pytest
from apcore import Identity
from starlette.applications import Starlette
from starlette.routing import Mount

from apcore_a2a.auth import AuthMiddleware, JWTAuthenticator, current_identity
from apcore_a2a.classify import REQUEST_KEY, RequestInfo
from apcore_a2a.execution.identity import Caller, caller_identity
from tests._support import TLS, running_server

from .keys import HMAC_SECRET, bearer
from .probe import probe_app, serve_probe

AUTH = JWTAuthenticator(HMAC_SECRET)


def as_alice() -> dict[str, str]:
    """Alice's credentials, made when used (a token made at import expires mid-suite)."""
    return bearer(jwt.encode({"sub": "alice", "exp": int(time.time()) + 600}, HMAC_SECRET))


EXEMPT = [
    "/.well-known/agent-card.json",
    "/.well-known/agent.json",
    "/.well-known/jwks.json",
    "/health",  # anonymous probes get the brief answer (see tests/ops/test_health.py)
]
PROTECTED = [
    ("GET", "/tasks"),
    ("GET", "/whoami"),
    ("POST", "/"),
    ("GET", "/extendedAgentCard"),
    ("GET", "/v1/card"),
    ("GET", "/explorer"),
    ("GET", "/metrics"),
    ("GET", "/.well-known/agent-card.json/../../tasks"),
    # An A2A route under a reserved segment is checked like one (then answered 404).
    ("POST", "/.well-known/message:send"),
]
# Paths under a reserved segment that are not the reserved route: no tenant, no route.
NOWHERE = [("GET", "/health/"), ("GET", "/metrics/x"), ("GET", "/.well-known/x")]


async def test_exempt_paths_open_everything_else_closed() -> None:
    async with serve_probe(AUTH) as base, httpx.AsyncClient(base_url=base, verify=TLS) as client:
        for path in EXEMPT:
            resp = await client.get(path)
            assert (path, resp.status_code, resp.text) == (path, 200, "ok")
        for method, path in PROTECTED:
            resp = await client.request(method, path)
            assert (method, path, resp.status_code) == (method, path, 401)
            assert resp.headers["www-authenticate"] == "Bearer"
        for method, path in NOWHERE:
            resp = await client.request(method, path)
            assert (method, path, resp.status_code) == (method, path, 404)
        assert (await client.get("/tasks", headers=as_alice())).status_code == 200


async def test_explorer_prefix_is_open_for_get_only_when_enabled() -> None:
    async with (
        serve_probe(AUTH, explorer="/explorer") as base,
        httpx.AsyncClient(base_url=base, verify=TLS) as client,
    ):
        assert (await client.get("/explorer")).status_code == 200
        assert (await client.get("/explorer/app.js")).status_code == 200
        assert (await client.post("/explorer/app.js")).status_code == 401
        # Not a route (a redirect to one that is not either): nothing is served.
        assert (await client.get("/explorer-evil")).status_code in (307, 404)
        # The Explorer's path is never a tenant: API-shaped paths under it are refused.
        # API-shaped paths under the prefix are not static files and stay protected.
        for path in (
            "/explorer/tasks",
            "/explorer/tasks/abc",
            "/explorer/tasks/a.b:subscribe",
            "/explorer/extendedAgentCard",
            "/explorer/..",
            "/explorer/x/...",
        ):
            assert (await client.get(path)).status_code in (401, 404, 405), path


async def test_metrics_need_credentials_unless_ops_details_are_public() -> None:
    async with serve_probe(AUTH) as base, httpx.AsyncClient(base_url=base, verify=TLS) as client:
        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/metrics", headers=as_alice())).status_code == 200
    async with (
        serve_probe(AUTH, ops_public=True) as base,
        httpx.AsyncClient(base_url=base, verify=TLS) as client,
    ):
        assert (await client.get("/metrics")).status_code == 200
        # Public means public: a bad token is ignored here, as on a health probe.
        assert (await client.get("/metrics", headers=bearer("forged"))).status_code == 200


async def test_optional_auth_admits_anonymous_but_not_bad_tokens() -> None:
    async with (
        serve_probe(AUTH, require_auth=False) as base,
        httpx.AsyncClient(base_url=base, verify=TLS) as client,
    ):
        anon = await client.get("/whoami")
        assert anon.status_code == 200
        assert anon.json() == {"scope": None, "var": None}
        assert (await client.get("/whoami", headers=as_alice())).json()["var"] == "alice"
        assert (await client.get("/whoami", headers=bearer("forged"))).status_code == 401


async def test_extended_card_requires_auth_even_when_optional() -> None:
    rpc = {"jsonrpc": "2.0", "id": 1, "params": {}}
    async with (
        serve_probe(AUTH, require_auth=False) as base,
        httpx.AsyncClient(base_url=base, verify=TLS) as client,
    ):
        for path in [
            "/extendedAgentCard",
            "/acme/extendedAgentCard",
            "/v1/card",
            "/agent/authenticatedExtendedCard",
        ]:
            assert (await client.get(path)).status_code == 401, path
            assert (await client.get(path, headers=as_alice())).status_code == 200, path
        for method in ["GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"]:
            resp = await client.post("/", json={**rpc, "method": method})
            assert resp.status_code == 401, method
            resp = await client.post("/", json={**rpc, "method": method}, headers=as_alice())
            assert resp.status_code == 200
        # Other anonymous JSON-RPC calls pass, with the body replayed intact downstream.
        body = json.dumps({**rpc, "method": "SendMessage", "params": {"x": "y" * 100_000}})
        resp = await client.post("/", content=body)
        assert resp.status_code == 200
        assert resp.json()["echo"] == body
        assert resp.json()["scope"] is None
        # A body that is not JSON is the route's business, not the middleware's.
        resp = await client.post("/", content=b"{not json")
        assert resp.json()["echo"] == "{not json"


async def _call(mw: AuthMiddleware, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/tasks",
        "headers": headers,
        "user": Caller(Identity(id="injected")),
        REQUEST_KEY: RequestInfo("a2a", "GET", binding="rest", method="ListTasks"),
    }
    await mw(scope, receive, send)
    return sent


async def test_identity_contextvar_is_reset_even_when_the_app_fails() -> None:
    seen: list[tuple[Any, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((caller_identity(scope), current_identity()))
        raise RuntimeError("boom")

    mw = AuthMiddleware(app, AUTH)
    header = [(b"authorization", as_alice()["Authorization"].encode())]
    with pytest.raises(RuntimeError, match="boom"):
        await _call(mw, header)
    assert seen[0][0] == seen[0][1] == Identity(id="alice", attrs={"auth_scheme": "jwt"})
    assert current_identity() is None

    # An identity planted in the scope upstream is discarded, never trusted.
    optional = AuthMiddleware(app, AUTH, require_auth=False)
    with pytest.raises(RuntimeError):
        await _call(optional, [])
    assert seen[1] == (None, None)


async def test_a_mounted_agent_reads_its_routes_below_the_root_path() -> None:
    host = Starlette(routes=[Mount("/agent", app=probe_app(AUTH))])
    async with running_server(host) as base, httpx.AsyncClient(base_url=base, verify=TLS) as client:
        assert (await client.get("/agent/health")).status_code == 200
        assert (await client.get("/agent/tasks")).status_code == 401
        assert (await client.get("/agent/tasks", headers=as_alice())).status_code == 200
