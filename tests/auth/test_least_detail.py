"""Least detail for logged-in callers (issue 31, item 7): ``/health`` details only for
operators, never the store's user or host; a maximum JWT lifetime, refused with 401."""

from __future__ import annotations

import time

import httpx

from tests._support import TLS

from .._postgres import PG_HOST, PG_PASSWORD, PG_PORT, PG_USER, pg_schema_url, require_postgres
from .._proxy import TcpProxy
from ..ops._agent import served
from .agent import serve_agent
from .keys import AUDIENCE, HMAC_SECRET, ISSUER, bearer, hs_token

JWT = {"auth_key": HMAC_SECRET, "auth_issuer": ISSUER, "auth_audience": AUDIENCE}
DETAILS = {"status", "module_count", "uptime_seconds", "version"}


def test_health_details_are_for_operators_only() -> None:
    with serve_agent(**JWT) as url, httpx.Client(base_url=url, timeout=20, verify=TLS) as http:
        user = http.get("/health", headers=bearer(hs_token("alice")))
        assert user.json() == {"status": "healthy"}
        operator = http.get("/health", headers=bearer(hs_token("ops", roles=["operator"])))
        assert set(operator.json()) == DETAILS


def test_an_api_key_from_the_settings_can_carry_the_operator_role() -> None:
    keys = ("k-ops-0123456789abcd=ops:operator", "k-bob-0123456789abcd=bob")
    with (
        serve_agent(api_keys=keys) as url,
        httpx.Client(base_url=url, timeout=20, verify=TLS) as http,
    ):
        user = http.get("/health", headers={"X-API-Key": "k-bob-0123456789abcd"})
        assert user.json() == {"status": "healthy"}
        operator = http.get("/health", headers={"X-API-Key": "k-ops-0123456789abcd"})
        assert set(operator.json()) == DETAILS


async def test_an_unreachable_store_is_not_named_to_operators() -> None:
    require_postgres()
    proxy = TcpProxy(PG_HOST, PG_PORT)
    await proxy.start()
    try:
        async with pg_schema_url() as pg_url:
            store = pg_url.replace(
                f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}",
                f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{proxy.port}",
            )
            async with served(task_store=store, **JWT) as (http, _app):
                await proxy.stop()
                headers = bearer(hs_token("ops", roles=["operator"]))
                down = await http.get("/health", headers=headers)
    finally:
        await proxy.stop()
    assert down.status_code == 503
    reason = down.json()["reason"]
    assert "unreachable" in reason
    schema = pg_url.rsplit("=", 1)[-1]
    for detail in (PG_USER, "127.0.0.1", str(proxy.port), PG_PASSWORD, schema):
        assert detail not in reason, reason


def test_a_token_living_longer_than_the_maximum_is_refused_with_401() -> None:
    settings = {**JWT, "auth_max_token_lifetime": 3600}
    with serve_agent(**settings) as url, httpx.Client(base_url=url, timeout=20, verify=TLS) as http:
        now = int(time.time())
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        headers = {"A2A-Version": "1.0"}
        short = hs_token("alice", exp=now + 600)
        assert http.post("/", json=body, headers={**headers, **bearer(short)}).status_code == 200
        forever = hs_token("alice", exp=now + 10 * 365 * 86400)
        refused = http.post("/", json=body, headers={**headers, **bearer(forever)})
        assert refused.status_code == 401
        assert "expires" not in refused.text  # the reason is logged, not told
