"""The Explorer's HTTP surface: redirect, page, assets, headers, caching, auth exemption."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from apcore_a2a.explorer import SECURITY_HEADERS, explorer_routes
from apcore_a2a.settings import SettingsError
from tests._support import TLS, running_server
from tests.browser._agent import demo_app
from tests.browser.conftest import serve_app

STATIC = Path(__file__).resolve().parents[2] / "apcore_a2a" / "explorer" / "static"


def bare_app(prefix: str = "/explorer") -> Starlette:
    return Starlette(routes=explorer_routes(prefix))


async def test_prefix_without_slash_redirects_to_the_page() -> None:
    async with running_server(bare_app()) as base, httpx.AsyncClient(verify=TLS) as client:
        resp = await client.get(base + "/explorer?x=1")
        assert resp.status_code == 308
        assert resp.headers["location"] == "explorer/?x=1"
        followed = await client.get(base + "/explorer", follow_redirects=True)
        assert followed.status_code == 200
        assert str(followed.url) == base + "/explorer/"


async def test_page_has_csp_security_headers_and_revalidates_by_etag() -> None:
    async with running_server(bare_app()) as base, httpx.AsyncClient(verify=TLS) as client:
        resp = await client.get(base + "/explorer/")
        assert resp.status_code == 200
        assert resp.headers["content-type"] == "text/html; charset=utf-8"
        for key, value in SECURITY_HEADERS.items():
            assert resp.headers[key] == value
        csp = resp.headers["content-security-policy"]
        assert "default-src 'none'" in csp
        assert "script-src 'self'" in csp and "connect-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert resp.headers["cache-control"] == "no-cache"
        assert '<meta name="apcore-card-url" content="../.well-known/agent-card.json">' in resp.text
        etag = resp.headers["etag"]
        again = await client.get(base + "/explorer/", headers={"if-none-match": etag})
        assert again.status_code == 304
        assert again.content == b""
        assert (
            again.headers["content-security-policy"] == SECURITY_HEADERS["content-security-policy"]
        )
        stale = await client.get(base + "/explorer/", headers={"if-none-match": '"other"'})
        assert stale.status_code == 200
        head = await client.head(base + "/explorer/")
        assert head.status_code == 200


@pytest.mark.parametrize(
    ("path", "media_type"),
    [
        ("/explorer/js/app.js", "text/javascript; charset=utf-8"),
        ("/explorer/explorer.css", "text/css; charset=utf-8"),
        ("/explorer/favicon.svg", "image/svg+xml"),
    ],
)
async def test_assets_are_served_with_type_headers_and_etag(path: str, media_type: str) -> None:
    async with running_server(bare_app()) as base, httpx.AsyncClient(verify=TLS) as client:
        resp = await client.get(base + path)
        assert resp.status_code == 200
        assert resp.headers["content-type"] == media_type
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["content-security-policy"].startswith("default-src 'none'")
        cached = await client.get(base + path, headers={"if-none-match": resp.headers["etag"]})
        assert cached.status_code == 304


@pytest.mark.parametrize(
    "path",
    [
        "/explorer/missing.js",
        "/explorer/page.html",  # the page template is not an asset
        "/explorer/%2e%2e/__init__.py",
        "/explorer/..%2f__init__.py",
        "/explorer/js/../../__init__.py",
    ],
)
async def test_unknown_and_escaping_paths_are_404(path: str) -> None:
    async with running_server(bare_app()) as base, httpx.AsyncClient(verify=TLS) as client:
        resp = await client.send(httpx.Request("GET", base + path))
        assert resp.status_code == 404
        assert "def explorer_routes" not in resp.text


async def test_only_get_and_head_are_allowed() -> None:
    async with running_server(bare_app()) as base, httpx.AsyncClient(verify=TLS) as client:
        assert (await client.post(base + "/explorer/")).status_code == 405
        assert (await client.put(base + "/explorer/js/app.js")).status_code == 405


async def test_nested_prefix_points_the_page_at_the_app_root_card() -> None:
    async with (
        running_server(bare_app("/tools/ui/")) as base,
        httpx.AsyncClient(verify=TLS) as client,
    ):
        resp = await client.get(base + "/tools/ui/")
        assert 'content="../../.well-known/agent-card.json"' in resp.text
        assert (await client.get(base + "/tools/ui/js/app.js")).status_code == 200
        assert (await client.get(base + "/explorer/")).status_code == 404


@pytest.mark.parametrize("prefix", ["", "/", "explorer", "/ex plorer", "/a/<b>", "//x"])
def test_bad_prefixes_are_rejected(prefix: str) -> None:
    with pytest.raises(ValueError, match="explorer prefix"):
        explorer_routes(prefix)


def test_assets_reference_nothing_outside_the_origin() -> None:
    pattern = re.compile(r"""(?:src|href|url)\s*[=(]\s*["']?(?:https?:)?//""", re.IGNORECASE)
    files = [*STATIC.rglob("*.*"), STATIC.parent / "page.html"]
    assert len(files) >= 8
    for file in files:
        text = file.read_text(encoding="utf-8")
        assert not pattern.search(text), file
        assert "@import" not in text, file


async def test_factory_mounts_the_explorer_only_when_enabled() -> None:
    async with serve_app(demo_app) as base, httpx.AsyncClient(verify=TLS) as client:
        assert (await client.get(base + "/explorer/")).status_code == 200
    async with serve_app(demo_app, explorer=False) as base, httpx.AsyncClient(verify=TLS) as client:
        for path in ("/explorer", "/explorer/", "/explorer/js/app.js", "/explorer/favicon.svg"):
            resp = await client.get(base + path)
            assert resp.status_code == 404, path
            assert "explorer" not in resp.text.lower(), path


async def test_custom_prefix_from_settings() -> None:
    async with (
        serve_app(demo_app, explorer_prefix="/ui") as base,
        httpx.AsyncClient(verify=TLS) as client,
    ):
        assert (await client.get(base + "/ui/")).status_code == 200
        assert (await client.get(base + "/explorer/")).status_code == 404


async def test_page_is_public_but_calls_need_credentials() -> None:
    async with (
        serve_app(demo_app, api_keys=("k1",)) as base,
        httpx.AsyncClient(verify=TLS) as client,
    ):
        assert (await client.get(base + "/explorer/")).status_code == 200
        assert (await client.get(base + "/explorer/js/app.js")).status_code == 200
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        headers = {"A2A-Version": "1.0"}
        denied = await client.post(base + "/", json=body, headers=headers)
        assert denied.status_code == 401
        # The exemption is for reading the page, not for writing under its prefix.
        assert (await client.post(base + "/explorer/", headers=headers)).status_code == 401
        allowed = await client.post(base + "/", json=body, headers={**headers, "X-API-Key": "k1"})
        assert allowed.status_code == 200


@pytest.mark.parametrize("prefix", ["/agent", "/v1", "/tasks", "/health", "/.well-known"])
def test_a_prefix_over_the_agents_own_routes_is_refused(prefix: str) -> None:
    """Mounted over ``/agent`` the Explorer's public-file rule took in the 0.3 extended card
    route (unauthenticated, then a 500 even with a valid key); over ``/v1`` or ``/tasks``
    it hid the REST routes (404). Such a prefix is refused when the app is built."""
    with pytest.raises(SettingsError, match=r"^explorer_prefix: would hide the agent's own route"):
        demo_app(explorer_prefix=prefix)


def test_a_prefix_next_to_the_agents_routes_is_fine() -> None:
    demo_app(explorer_prefix="/agent-ui")
    demo_app(explorer_prefix="/agent/ui")
