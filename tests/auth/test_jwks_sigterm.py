"""Issue 17 acceptance: a hanging JWKS endpoint and 40 tokens with random ``kid``s.

The real CLI agent serves the examples with JWT (JWKS) *and* API-key auth. While the key
endpoint hangs and 40 bearer requests wait on it, an API-key call to the sync module
``math.add`` must answer (it runs on the thread pool the key fetches used to occupy), and
SIGTERM must end the process (exit 0) while the key fetch still hangs.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx

from tests._support import ROOT, START_TIMEOUT, TLS, ServerProcess, free_port, stop_process

from .hanging import hanging_endpoint
from .keys import ec_pair

API_KEY = "k-outage-" + secrets.token_hex(12)
SHUTDOWN_TIMEOUT = 3.0
#: seconds the test waits for the exit before it fails (not how fast it should be)
HANG_GUARD = 120


def add_request() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "role": "ROLE_USER",
                "messageId": uuid.uuid4().hex,
                "parts": [{"data": {"a": 2, "b": 40}}],
                "metadata": {"skillId": "math.add"},
            }
        },
    }


async def add_with_api_key(http: httpx.AsyncClient, base: str) -> None:
    resp = await http.post(
        base + "/", json=add_request(), headers={"X-API-Key": API_KEY, "A2A-Version": "1.0"}
    )
    assert resp.status_code == 200, resp.text
    task = resp.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["artifacts"][0]["parts"][0]["data"] == {"sum": 42}


async def wait_ready(base: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    async with httpx.AsyncClient(verify=TLS) as http:
        while True:
            assert proc.poll() is None, "agent exited during start-up"
            try:
                if (await http.get(base + "/.well-known/agent-card.json")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "agent did not start"
            await asyncio.sleep(0.05)


async def test_api_key_call_answers_and_sigterm_exits_while_the_jwks_endpoint_hangs() -> None:
    async with hanging_endpoint() as hang:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "JWT_"))}
        env.update(
            JWT_JWKS_URL=hang.url,
            JWT_JWKS_TIMEOUT="3600",  # the fetch hangs for the whole test
            A2A_API_KEYS=f"{API_KEY}=ops",
            A2A_SHUTDOWN_TIMEOUT=str(SHUTDOWN_TIMEOUT),
        )
        cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--extensions-dir", str(ROOT / "examples" / "extensions")]
        proc = ServerProcess(cmd, cwd=ROOT, env=env)  # forked (tests/_zygote.py)
        try:
            await wait_ready(base, proc)
            limits = httpx.Limits(max_connections=100)
            async with httpx.AsyncClient(timeout=60, limits=limits, verify=TLS) as http:
                await add_with_api_key(http, base)

                tokens = [
                    ec_pair(secrets.token_hex(8)).sign(
                        {"sub": f"u{i}", "exp": int(time.time()) + 300}
                    )
                    for i in range(40)
                ]
                bearers = [
                    asyncio.create_task(
                        http.get(
                            base + "/tasks",
                            headers={"Authorization": f"Bearer {t}", "A2A-Version": "1.0"},
                        )
                    )
                    for t in tokens
                ]
                await hang.wait_open(1)

                for _ in range(3):
                    await add_with_api_key(http, base)
                # Answered while every bearer request still waits on the hanging fetch.
                assert not any(b.done() for b in bearers)
                assert hang.open == 1 and hang.connections == 1, "one fetch for 40 tokens"

                # SIGTERM ends the process while the fetch still hangs (it would for an
                # hour): shutdown does not wait for it. The wait is only a hang guard.
                proc.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(proc.wait, HANG_GUARD) == 0
                assert hang.connections == 1
                answers = await asyncio.gather(*bearers, return_exceptions=True)
                # Each bearer request got a refusal or lost its connection; none was let in.
                for answer in answers:
                    assert isinstance(answer, httpx.HTTPError) or answer.status_code == 401
        finally:
            stop_process(proc, timeout=5)
