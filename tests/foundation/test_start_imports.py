"""An agent imports only the machinery its configuration chose: start-up CPU is mostly
imports (``docs/operations.md``, *Start-up*), so the SQL dialects and their drivers are
loaded by a SQL store, and PyJWT and cryptography by JWT auth, card or push signing, not by
an agent on the default settings.

The subject is what a fresh interpreter imports, so each check runs ``python -c`` itself
(not forked from the tests' zygote, which has imported everything already)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests._support import ROOT

#: what only a SQL store needs: the dialects' modules and their drivers (sqlalchemy's core
#: comes with a2a-sdk's own package inits and is not ours to defer)
SQL_ONLY = ["sqlalchemy.dialects.postgresql", "sqlalchemy.dialects.sqlite", "aiosqlite", "asyncpg"]
#: what only JWT auth, signed cards and signed push deliveries need
SIGNING_ONLY = ["jwt", "cryptography"]

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import httpx
    from apcore import Registry
    from apcore_a2a import async_serve

    WATCHED = {watched!r}

    async def main():
        registry = Registry(extensions_dir={extensions!r})
        registry.discover()
        app = async_serve(registry, environ={{}}, **{settings!r})
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
                card = (await c.get("/.well-known/agent-card.json")).json()
                after_card = sorted(m for m in WATCHED if m in sys.modules)
                body = {{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {{
                    "message": {{"messageId": "m", "role": "ROLE_USER",
                                "parts": [{{"data": {{"a": 2, "b": 40}}}}],
                                "metadata": {{"skillId": "math.add"}}}}}}}}
                headers = {{"A2A-Version": "1.0"}}
                task = (await c.post("/", json=body, headers=headers)).json()["result"]["task"]
                get = {{"jsonrpc": "2.0", "id": 2, "method": "GetTask",
                       "params": {{"id": task["id"]}}}}
                read = (await c.post("/", json=get, headers=headers)).json()["result"]
        print(json.dumps({{
            "skills": sorted(s["id"] for s in card["skills"]),
            "after_card": after_card,
            "after_run": sorted(m for m in WATCHED if m in sys.modules),
            "state": read["status"]["state"],
            "sum": read["artifacts"][0]["parts"][0]["data"]["sum"],
            "signed": bool(card.get("signatures")),
        }}))

    asyncio.run(main())
    """
)


def _serve_once(settings: dict[str, object]) -> dict[str, object]:
    """Build the example agent with *settings* in a fresh interpreter, read its card, run
    ``math.add`` and read the task back: what it imported after the card and after the run."""
    code = SCRIPT.format(
        watched=SQL_ONLY + SIGNING_ONLY,
        extensions=str(ROOT / "examples" / "extensions"),
        settings=settings,
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def test_default_agent_imports_no_sql_dialect_nor_jwt() -> None:
    seen = _serve_once({})
    assert "math.add" in seen["skills"]  # type: ignore[operator]
    assert (seen["state"], seen["sum"]) == ("TASK_STATE_COMPLETED", 42)
    assert seen["after_card"] == [], "imported at start-up by default"
    assert seen["after_run"] == [], "imported by a run by default"


def test_sqlite_store_agent_still_loads_its_dialect_and_serves(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    seen = _serve_once({"task_store": f"sqlite:///{db}"})
    assert (seen["state"], seen["sum"]) == ("TASK_STATE_COMPLETED", 42)
    assert {"sqlalchemy.dialects.sqlite", "aiosqlite"} <= set(seen["after_run"])  # type: ignore[arg-type]
    assert db.stat().st_size > 0


def test_signing_agent_still_loads_pyjwt_and_signs_its_card() -> None:
    seen = _serve_once({"card_signing": True, "push_notifications": True})
    assert (seen["state"], seen["sum"]) == ("TASK_STATE_COMPLETED", 42)
    assert set(SIGNING_ONLY) <= set(seen["after_card"])  # type: ignore[arg-type]
    assert seen["signed"] is True
