"""Modules registered or unregistered at runtime show up in (or leave) the cards at once."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from typing import Any

import httpx

from ._agent import Extra, build_registry, message_params, rpc, send, served

CARD = "/.well-known/agent-card.json"
LEGACY = "/.well-known/agent.json"
BASE = {"ops.add", "ops.fail", "ops.sleep"}


async def _card(http: httpx.AsyncClient, path: str = CARD) -> tuple[set[str], str]:
    response = await http.get(path)
    assert response.status_code == 200
    skills = {s["id"] for s in response.json()["skills"]}
    return skills, response.headers["etag"]


async def test_register_and_unregister_at_runtime() -> None:
    registry = build_registry()
    async with served(registry) as (http, _app):
        skills, etag = await _card(http)
        legacy_skills, legacy_etag = await _card(http, LEGACY)
        assert skills == legacy_skills == BASE
        assert (await http.get(CARD, headers={"If-None-Match": etag})).status_code == 304

        description = (await http.get(CARD)).json()["description"]
        registry.register("ops.extra", Extra())
        added, added_etag = await _card(http)
        assert (await http.get(CARD)).json()["description"] != description
        assert added == BASE | {"ops.extra"}
        assert added_etag != etag
        assert (await _card(http, LEGACY))[0] == added
        assert (await _card(http, LEGACY))[1] != legacy_etag
        # a client revalidating with the old ETag gets the new card
        revalidated = await http.get(CARD, headers={"If-None-Match": etag})
        assert revalidated.status_code == 200
        assert "ops.extra" in {s["id"] for s in revalidated.json()["skills"]}
        task = await send(http, "ops.extra", {"text": "hi"})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["data"] == {"text": "HI"}

        registry.unregister("ops.extra")
        removed, removed_etag = await _card(http)
        assert removed == BASE
        assert removed_etag != added_etag
        assert (await _card(http, LEGACY))[0] == BASE
        gone = await rpc(http, "SendMessage", message_params("ops.extra", {"text": "hi"}))
        assert gone["error"]["code"] == -32601
        assert "ops.extra" not in gone["error"]["message"].replace("Skill not found: ops.extra", "")
        # the others are untouched
        assert (await send(http, "ops.add", {"a": 1, "b": 2}))["status"]["state"] == (
            "TASK_STATE_COMPLETED"
        )


async def test_a_module_without_description_is_not_published() -> None:
    class Undescribed(Extra):
        description = ""

    registry = build_registry()
    async with served(registry) as (http, _app):
        registry.register("ops.hidden", Undescribed())
        assert (await _card(http))[0] == BASE
        reply = await rpc(http, "SendMessage", message_params("ops.hidden", {"text": "x"}))
        assert reply["error"]["code"] == -32601


async def test_the_extended_card_follows_the_registry() -> None:
    registry = build_registry()
    key = {"X-API-Key": "key-1"}

    async def extended(http: httpx.AsyncClient) -> set[str]:
        reply = await rpc(http, "GetExtendedAgentCard", {}, key)
        return {s["id"] for s in reply["result"]["skills"]}

    async with served(registry, api_keys=("key-1",)) as (http, _app):
        assert await extended(http) == BASE
        registry.register("ops.extra", Extra())
        assert await extended(http) == BASE | {"ops.extra"}
        rest = await http.get("/extendedAgentCard", headers={**key, "A2A-Version": "1.0"})
        assert "ops.extra" in {s["id"] for s in rest.json()["skills"]}
        registry.unregister("ops.extra")
        assert await extended(http) == BASE
        gone = await rpc(http, "SendMessage", message_params("ops.extra", {"text": "x"}), key)
        assert gone["error"]["code"] == -32601


async def test_readers_never_see_a_half_built_card() -> None:
    registry = build_registry()
    stop = threading.Event()
    flips = 0

    def churn() -> None:
        nonlocal flips
        while not stop.is_set():
            registry.register("ops.extra", Extra())
            registry.unregister("ops.extra")
            flips += 1
            # Yield the GIL now and then: a tight loop of card rebuilds would starve the
            # server's event loop until keep-alive connections time out under the client.
            time.sleep(0.002)

    async with served(registry) as (http, _app):
        worker = threading.Thread(target=churn, daemon=True)
        worker.start()
        try:

            async def read() -> tuple[bytes, str]:
                response = await http.get(CARD)
                assert response.status_code == 200
                return response.content, response.headers["etag"]

            async def call() -> dict[str, Any]:
                return await rpc(http, "SendMessage", message_params("ops.extra", {"text": "a"}))

            cards = []
            outcomes = []
            for _ in range(15):
                batch = await asyncio.gather(*(read() for _ in range(8)), call(), call())
                cards += batch[:8]
                outcomes += batch[8:]
        finally:
            stop.set()
            worker.join(10)
        assert flips > 10, "the registry hardly changed during the test"
    seen = set()
    for body, etag in cards:
        # the ETag was computed from exactly these bytes: one build, never two halves
        assert etag == f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'
        card = json.loads(body)
        skills = {s["id"] for s in card["skills"]}
        assert skills in (BASE, BASE | {"ops.extra"})
        schemas = next(
            (
                e["params"]["skills"]
                for e in card["capabilities"].get("extensions", [])
                if "skills" in e.get("params", {})
            ),
            None,
        )
        assert schemas is not None and set(schemas) == skills
        seen.add(frozenset(skills))
    for outcome in outcomes:
        if "error" in outcome:  # gone before the request was routed
            assert outcome["error"]["code"] == -32601
            continue
        status = outcome["result"]["task"]["status"]
        if status["state"] == "TASK_STATE_FAILED":  # gone once its task existed
            assert status["message"]["parts"][0]["text"] == "Skill not found: ops.extra"
        else:
            assert status["state"] == "TASK_STATE_COMPLETED", status
