"""The SDK behaviour ``apcore_a2a/upstream/exact_mounts.py`` corrects: a2a-sdk 1.3 mounts
its REST routes under ``Mount("/{tenant}")``, which Starlette's router hands every path of
two segments or more, and whose ``/x/`` spelling its slash redirects find for any one
segment. On a plain a2a-sdk agent (card, JSON-RPC and REST routes in the order the SDK
documents) a ``POST`` of the card gets the mount's 404, not the card route's 405, and a
typo of one segment gets a 307 to ``/typo/``. A failure here means the SDK's mount claims
only the paths its routes take: delete that file."""

from __future__ import annotations

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app


def test_sdk_tenant_mount_takes_the_card_path_and_redirects_a_typo() -> None:
    app = build_sdk_app("http://127.0.0.1", push=False)
    with threaded_server(app) as url, httpx.Client(base_url=url, timeout=30, verify=TLS) as http:
        card = http.post("/.well-known/agent-card.json", json={})
        typo = http.post("/message:sendx", json={}, headers={"A2A-Version": "1.0"})
        got = http.get("/.well-known/agent-card.json")
    assert got.status_code == 200  # the card route is there and serves GET
    assert card.status_code == 404, card.text
    assert typo.status_code == 307, typo.text
    assert typo.headers["location"] == url + "/message:sendx/"
