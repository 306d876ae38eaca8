"""The whole server with required auth: exempt paths, the attack table, the CLI and env."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Iterator

import httpx
import jwt
import pytest

from tests._support import ROOT, TLS, cli_server, send_message

from .agent import serve_agent
from .attacks import ATTACKS, UNAUTHORIZED_BODY, refusal_text
from .keys import AUDIENCE, HMAC_SECRET, ISSUER, bearer, hs_token

EXEMPT = ["/.well-known/agent-card.json", "/.well-known/agent.json"]
PROTECTED = [
    ("POST", "/"),
    ("GET", "/tasks"),
    ("GET", "/tasks/some-id"),
    ("POST", "/message:send"),
    ("POST", "/message:stream"),
    ("POST", "/v1/message:send"),
    ("GET", "/v1/tasks/some-id"),
    ("GET", "/extendedAgentCard"),
    ("GET", "/v1/card"),
    ("GET", "/agent/authenticatedExtendedCard"),
    ("GET", "/acme/tasks"),
]
SEND = send_message("demo.add", {"a": 1, "b": 2})


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with serve_agent(auth_key=HMAC_SECRET, auth_issuer=ISSUER, auth_audience=AUDIENCE) as url:
        yield url


async def test_exempt_paths_open_everything_else_closed(agent_url: str) -> None:
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        for path in EXEMPT:
            assert (await http.get(path)).status_code == 200, path
        for path in ("/health", "/.well-known/jwks.json"):
            assert (await http.get(path)).status_code != 401, path
        # Operations figures are for callers with credentials (ops_details_public opens them).
        assert (await http.get("/metrics")).status_code == 401
        for method, path in PROTECTED:
            resp = await http.request(method, path, json={})
            assert resp.status_code == 401, (method, path)
            assert refusal_text(resp) == UNAUTHORIZED_BODY
        ok = await http.post("/", json=SEND, headers={**bearer(hs_token()), "A2A-Version": "1.0"})
        assert ok.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("case", [c for c, (server, _) in ATTACKS.items() if server == "HS"])
async def test_attack_table_on_the_real_server(
    agent_url: str, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="apcore_a2a.auth")
    headers = ATTACKS[case][1]()
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        resp = await http.post("/", json=SEND, headers={**headers, "A2A-Version": "1.0"})
    assert resp.status_code == 401
    assert refusal_text(resp) == UNAUTHORIZED_BODY
    assert resp.headers["www-authenticate"] == "Bearer"
    token = headers.get("Authorization", "").partition(" ")[2]
    if token:
        assert token not in caplog.text
        assert all(token not in v for v in resp.headers.values())


def test_cli_bearer_without_key_exits_1(taken_port: str) -> None:
    # on a taken port, not 1 (which root may bind): were bearer accepted without a key,
    # serve would stop at once (exit 3) rather than serve until the timeout
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "apcore_a2a",
            "serve",
            "--extensions-dir",
            str(ROOT / "examples" / "extensions"),
            "--auth-type",
            "bearer",
            "--port",
            taken_port,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    assert proc.returncode == 1
    assert "--auth-type: requires --auth-key" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_env_jwt_key_and_api_key_flag() -> None:
    key = "k-cli-0123456789abcdef"
    env = {"JWT_KEY": HMAC_SECRET, "JWT_ISSUER": ISSUER, "JWT_AUDIENCE": AUDIENCE}
    args = [
        "--extensions-dir",
        str(ROOT / "examples" / "extensions"),
        "--auth-type",
        "bearer",
        "--api-key",
        f"{key}=ci-bot",
    ]
    with cli_server(args, env=env) as (base, _proc):
        card = httpx.get(base + "/.well-known/agent-card.json", verify=TLS).json()
        assert set(card["securitySchemes"]) == {"bearer", "apiKey"}
        assert httpx.get(base + "/tasks", verify=TLS).status_code == 401
        v10 = {"A2A-Version": "1.0"}
        assert (
            httpx.get(
                base + "/tasks", headers={**bearer(hs_token()), **v10}, verify=TLS
            ).status_code
            == 200
        )
        assert (
            httpx.get(base + "/tasks", headers={"X-API-Key": key, **v10}, verify=TLS).status_code
            == 200
        )
        wrong_aud = jwt.encode({"sub": "a", "aud": "other", "iss": ISSUER}, HMAC_SECRET)
        assert httpx.get(base + "/tasks", headers=bearer(wrong_aud), verify=TLS).status_code == 401


async def test_explorer_page_is_public_but_api_paths_below_it_are_not() -> None:
    with serve_agent(auth_key=HMAC_SECRET, explorer=True) as url:
        async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
            for path in ("/explorer/", "/explorer/js/app.js", "/explorer/explorer.css"):
                assert (await http.get(path)).status_code == 200, path
            for path in ("/explorer/tasks", "/explorer/tasks/some-id"):
                # The Explorer's files, not a tenant's tasks: no such file.
                resp = await http.get(path, headers={"A2A-Version": "1.0"})
                assert resp.status_code == 404, path


@pytest.mark.parametrize(("version", "method"), [("1.0", "GetTask"), ("0.3", "tasks/get")])
async def test_a_refused_call_whose_id_cannot_be_written_back_is_still_a_401(
    agent_url: str, version: str, method: str
) -> None:
    # JSON lets "\ud800" (an unpaired surrogate) stand in an id; the refusal echoed it and
    # could not encode its own answer: HTTP 500, a traceback at ERROR, for anyone.
    call = json.dumps({"jsonrpc": "2.0", "id": "@", "method": method, "params": {"id": "t"}})
    body = call.replace('"@"', '"\\ud800"')
    headers = {"A2A-Version": version, "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        resp = await http.post("/", content=body.encode(), headers=headers)
    assert resp.status_code == 401, resp.text
    assert refusal_text(resp) == UNAUTHORIZED_BODY
    assert resp.json()["id"] is None  # JSON-RPC 2.0 §5: an id that could not be read
    assert resp.headers["www-authenticate"] == "Bearer"


async def test_a_caller_without_credentials_cannot_hold_a_connection_by_stalling_its_body(
    agent_url: str,
) -> None:
    # The refusal reads a JSON-RPC body only for its id: a body that never comes must not
    # keep the connection (and its task) waiting for a caller the agent does not serve.
    url = httpx.URL(agent_url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'A2A-Version: 1.0\r\nContent-Length: 1000\r\n\r\n{"jsonrpc": "2.0", "id": 3'
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
        length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0])
        body = json.loads(await asyncio.wait_for(reader.readexactly(length), 15))
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 401 "), head
    assert b"\r\nwww-authenticate: Bearer\r\n" in head
    assert body["id"] is None  # the id was never read
    assert body["error"]["message"] == UNAUTHORIZED_BODY


async def test_a_path_no_route_takes_answers_everyone_alike(agent_url: str) -> None:
    """docs/auth.md: nothing is served there, so the answer (404) tells a caller without
    credentials no more than one with them."""
    async with httpx.AsyncClient(base_url=agent_url, verify=TLS) as http:
        for path in ("/nope", "/tasks/", "/TASKS"):
            anonymous = await http.get(path)
            known = await http.get(path, headers=bearer(hs_token()))
            assert anonymous.status_code == known.status_code == 404, path
            assert anonymous.json() == known.json(), path
