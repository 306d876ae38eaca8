"""`apcore-a2a serve --config examples/agent.yaml`: API-key auth, SQLite store, explorer."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import GetTaskRequest, TaskState

from apcore_a2a.upstream.apcore_accessors import config_of
from tests._sdk import request
from tests._support import (
    CLI_STOP_TIMEOUT,
    ROOT,
    TLS,
    ServerProcess,
    cli_server,
    free_port,
    stop_process,
    wait_http,
)
from tests.storage._a2a import send

from ._helpers import clean_env

EXAMPLE = ROOT / "examples" / "agent.yaml"
KEY = "example-key-0123456789"  # the demo key in examples/agent.yaml


async def _client(base: str, headers: dict[str, str]) -> object:
    http = httpx.AsyncClient(headers=headers, timeout=30, verify=TLS)
    return await ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create_from_url(
        base
    )


async def test_example_serves_with_api_key_sqlite_and_explorer(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    # Only the store moves (so the test leaves nothing in examples/); the rest is the file.
    env = clean_env(A2A_TASK_STORE=f"sqlite:///{db}")
    args = ["--config", str(EXAMPLE)]
    with cli_server(args, env=env) as (base, _proc):
        card = httpx.get(base + "/.well-known/agent-card.json", verify=TLS).json()
        assert card["name"] == "apcore-examples" and card["version"] == "1.0.0"
        assert "apiKey" in card["securitySchemes"]
        assert {s["id"] for s in card["skills"]} >= {"math.add", "greet.hello"}
        page = httpx.get(base + "/explorer/", verify=TLS)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]

        anonymous = httpx.post(
            base + "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
            headers={"A2A-Version": "1.0"},
            verify=TLS,
        )
        assert anonymous.status_code == 401
        client = await _client(base, {"X-API-Key": "wrong-key-0123456789"})
        with pytest.raises(A2AClientError, match=r"401|nauthori|nauthenti"):
            await send(client, request("math.add", {"a": 1, "b": 2}))

        client = await _client(base, {"X-API-Key": KEY})
        task = await send(client, request("math.add", {"a": 20, "b": 22}))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert db.is_file()

    # The task outlives the process: it is in the SQLite file.
    with cli_server(args, env=env) as (base, _proc):
        client = await _client(base, {"X-API-Key": KEY})
        again = await client.get_task(GetTaskRequest(id=task.id))
        assert again.status.state == TaskState.TASK_STATE_COMPLETED
        assert again.artifacts == task.artifacts


def test_serve_config_from_python(tmp_path: Path) -> None:
    """`serve(config=...)` with no registry serves the file's modules; keywords win."""
    port = free_port()
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        from apcore_a2a import serve
        serve(config={str(EXAMPLE)!r}, port={port}, name="from-python",
              task_store={f"sqlite:///{tmp_path / 'py.db'}"!r})
        """)
    )
    proc = ServerProcess(
        [sys.executable, str(script)], cwd=tmp_path, env={**clean_env(), "PYTHONPATH": str(ROOT)}
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health", proc=proc)
        card = httpx.get(base + "/.well-known/agent-card.json", verify=TLS).json()
        assert card["name"] == "from-python" and card["version"] == "1.0.0"
        assert "apiKey" in card["securitySchemes"]
        assert httpx.get(base + "/explorer/", verify=TLS).status_code == 200
    finally:
        stop_process(proc, timeout=CLI_STOP_TIMEOUT)


def test_config_file_timeout_governs_the_built_executor(tmp_path: Path) -> None:
    from apcore_a2a import A2AServerFactory

    examples = Path(__file__).resolve().parents[2] / "examples" / "extensions"
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"modules:\n  extensions_dirs: [{examples}]\nlimits:\n  execution_timeout: 45\n"
    )
    factory = A2AServerFactory(config=config, environ={})
    assert factory.settings.execution_timeout == 45
    assert config_of(factory.executor).get("executor.default_timeout") == 45_000
    flagged = A2AServerFactory(config=config, environ={}, execution_timeout=7)
    assert config_of(flagged.executor).get("executor.default_timeout") == 7_000
