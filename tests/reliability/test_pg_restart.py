"""PostgreSQL restarted under load (nox ``reliability`` session only, never in CI).

The local cluster is shared with other tests, so this runs only when
``A2A_RELIABILITY_FULL=1`` and ``pg_ctlcluster`` can restart it. During the outage the
agent must answer with clean errors (no 5xx, nothing leaked) and ``/health`` must say
503; afterwards it must serve again without being restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests._support import TLS

from . import _report
from ._load import message
from ._oracle import Oracle, Violation
from ._serve import agent_process

pytestmark = pytest.mark.skipif(
    not _report.FULL or shutil.which("pg_ctlcluster") is None,
    reason="restarts the shared local PostgreSQL: nox -s reliability only",
)
TALLY = _report.tally("fault: PostgreSQL restart")


def _cluster() -> tuple[str, str]:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
    return version, "main"


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-c", sql],
        check=True,
        capture_output=True,
    )


@contextlib.contextmanager
def _schema() -> Iterator[str]:
    name = f"apcore_a2a_rel_{uuid.uuid4().hex[:10]}"
    _psql(f"CREATE SCHEMA {name}")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/test?schema={name}"
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _psql(f"DROP SCHEMA {name} CASCADE")


async def test_postgres_restart_mid_load_recovers_without_restarting_the_agent() -> None:
    # -32092 (StoreUnavailableError, retry later) is the documented answer to an outage.
    oracle = Oracle(TALLY, codes={-32092})
    outcomes: Counter[str] = Counter()
    health: Counter[int] = Counter()
    stop = asyncio.Event()
    with _schema() as url, agent_process(task_store=url) as served:
        async with httpx.AsyncClient(base_url=served.url, timeout=30, verify=TLS) as http:

            async def worker() -> None:
                while not stop.is_set():
                    body = {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "SendMessage",
                        "params": {"message": message("rel.add", {"a": 1, "b": 2})},
                    }
                    try:
                        response = await http.post("/", json=body, headers={"A2A-Version": "1.0"})
                    except httpx.HTTPError as exc:
                        outcomes[f"transport {type(exc).__name__}"] += 1
                        continue
                    try:
                        payload = oracle.check(response, internal_ok=True)
                    except Violation:
                        outcomes[f"violation {response.status_code}"] += 1
                        continue
                    if "result" in payload:
                        outcomes[payload["result"]["task"]["status"]["state"]] += 1
                    else:
                        outcomes[
                            f"error {payload['error']['code']} {payload['error']['message'][:60]}"
                        ] += 1

            async def prober() -> None:
                while not stop.is_set():
                    health[(await http.get("/health")).status_code] += 1
                    await asyncio.sleep(0.1)

            workers = [asyncio.create_task(worker()) for _ in range(4)] + [
                asyncio.create_task(prober())
            ]
            await asyncio.sleep(2)
            version, name = _cluster()
            restarted = time.monotonic()
            await asyncio.to_thread(
                subprocess.run,
                ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"],
                check=True,
            )
            await asyncio.sleep(3)
            stop.set()
            await asyncio.gather(*workers)

            # Recovery without restarting the agent.
            deadline = time.monotonic() + 30
            while (await http.get("/health")).status_code != 200:
                assert time.monotonic() < deadline, "agent did not recover within 30 s"
                await asyncio.sleep(0.2)
            recovered = time.monotonic() - restarted
            after = [
                (
                    await http.post(
                        "/",
                        json={
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "SendMessage",
                            "params": {"message": message("rel.add", {"a": 2, "b": 2})},
                        },
                        headers={"A2A-Version": "1.0"},
                    )
                ).json()
                for _ in range(20)
            ]
            assert served.proc.poll() is None
    TALLY.notes.append(
        f"outcomes {dict(outcomes)}; /health {dict(health)}; healthy again {recovered:.1f}s after the restart began"
    )
    assert [a["result"]["task"]["status"]["state"] for a in after] == ["TASK_STATE_COMPLETED"] * 20
    assert not [k for k in outcomes if k.startswith("violation")], outcomes
