"""CORS in front of authentication: preflight without credentials, 401s readable by browsers."""

from __future__ import annotations

import logging

import httpx
import pytest
from starlette.applications import Starlette

from apcore_a2a.auth import authenticator_from_settings, cors_middleware, security_middleware
from apcore_a2a.settings import Settings
from tests._support import TLS, running_server

from .agent import serve_agent
from .keys import HMAC_SECRET
from .probe import ROUTES

ORIGIN = "https://app.example"


def app_for(**values: object) -> Starlette:
    s = Settings.resolve(values, environ={})
    return Starlette(
        routes=ROUTES,
        middleware=[m for m in security_middleware(s, authenticator_from_settings(s)) if m],
    )


async def test_preflight_and_401_carry_cors_headers_for_allowed_origin() -> None:
    app = app_for(auth_key=HMAC_SECRET, cors_origins=ORIGIN)
    async with running_server(app) as base, httpx.AsyncClient(base_url=base, verify=TLS) as client:
        pre = await client.options(
            "/",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type, a2a-version",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == ORIGIN
        allowed_methods = pre.headers["access-control-allow-methods"]
        assert {"GET", "POST", "OPTIONS"} <= set(allowed_methods.replace(" ", "").split(","))
        assert "DELETE" not in allowed_methods
        assert "access-control-allow-credentials" not in pre.headers

        denied = await client.post("/", json={}, headers={"Origin": ORIGIN})
        assert denied.status_code == 401
        assert denied.headers["access-control-allow-origin"] == ORIGIN
        assert "WWW-Authenticate" in denied.headers["access-control-expose-headers"]

        other = await client.options(
            "/",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert other.status_code == 400
        assert "access-control-allow-origin" not in other.headers
        resp = await client.get("/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in resp.headers


async def test_preflight_rejects_unlisted_request_headers() -> None:
    app = app_for(cors_origins=ORIGIN)
    async with running_server(app) as base, httpx.AsyncClient(base_url=base, verify=TLS) as client:
        pre = await client.options(
            "/tasks",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "x-secret-internal",
            },
        )
        assert pre.status_code == 400


def test_wildcard_warns_and_empty_means_no_cors(caplog: pytest.LogCaptureFixture) -> None:
    assert cors_middleware([]) is None
    assert cors_middleware(["", "  "]) is None
    with caplog.at_level(logging.WARNING, logger="apcore_a2a.auth"):
        mw = cors_middleware(["https://a.example", "*"])
    assert mw is not None
    assert mw.kwargs["allow_origins"] == ["*"]
    assert "any origin" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="apcore_a2a.auth"):
        cors_middleware(["https://a.example/"])
    assert caplog.text == ""


def test_the_served_agent_answers_preflights_of_its_origins_before_authentication() -> None:
    # The whole agent, as serve() builds it (CORS at its edge), not only the middleware.
    with (
        serve_agent(auth_key=HMAC_SECRET, cors_origins=ORIGIN) as url,
        httpx.Client(verify=TLS) as client,
    ):
        ask = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
        pre = client.options(
            url + "/", headers=ask | {"Access-Control-Request-Headers": "authorization"}
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == ORIGIN
        denied = client.post(url + "/", json={}, headers={"Origin": ORIGIN})
        assert denied.status_code == 401
        assert denied.headers["access-control-allow-origin"] == ORIGIN
        card = client.get(url + "/.well-known/agent-card.json", headers={"Origin": ORIGIN})
        assert card.headers["access-control-allow-origin"] == ORIGIN
        other = client.options(url + "/", headers=ask | {"Origin": "https://evil.example"})
        assert other.status_code == 400
        assert "access-control-allow-origin" not in other.headers
