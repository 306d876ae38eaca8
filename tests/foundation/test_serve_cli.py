"""serve(), async_serve(), the factory's argument checks, and ``apcore-a2a serve``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from a2a.types import Part, TaskState
from apcore import Config, Executor, Registry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from apcore_a2a import A2AServerFactory, async_serve
from tests._sdk import data_part, make_client
from tests._support import (
    EXAMPLES,
    ROOT,
    TLS,
    ServerProcess,
    cli_server,
    free_port,
    run_python,
    running_server,
    stop_process,
    wait_http,
)
from tests.foundation.modules import Add, build_registry
from tests.foundation.sdk import message, send


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_python([sys.executable, "-m", "apcore_a2a", *args], env=env)


async def test_async_serve_app_answers_when_mounted_in_a_host_app() -> None:
    """As the README shows: ``Mount("/agent", app=async_serve(registry))`` in a host app
    under a real uvicorn, with no lifespan wiring; A2A calls through the mount work."""
    agent = async_serve(build_registry(), environ={})

    async def ping(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("host")

    host = Starlette(routes=[Route("/ping", ping), Mount("/agent", app=agent)])
    async with (
        running_server(host) as url,
        httpx.AsyncClient(base_url=url, timeout=20, verify=TLS) as http,
    ):
        assert (await http.get("/ping")).text == "host"
        card = await http.get("/agent/.well-known/agent-card.json")
        assert card.status_code == 200
        assert "math.add" in {skill["id"] for skill in card.json()["skills"]}
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": "mounted-1",
                    "role": "ROLE_USER",
                    "parts": [{"data": {"a": 40, "b": 2}}],
                    "metadata": {"skillId": "math.add"},
                }
            },
        }
        headers = {"A2A-Version": "1.0"}
        sent = (await http.post("/agent/", json=body, headers=headers)).json()
        task = sent["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", sent
        assert task["artifacts"][0]["parts"] == [{"data": {"sum": 42}}]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
        fetched = (await http.post("/agent/", json=get, headers=headers)).json()
        assert fetched["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # the host's own paths stay the host's: the agent only answers under its mount
        assert (await http.post("/", json=body, headers=headers)).status_code == 404


def test_factory_rejects_empty_registry_and_bad_objects() -> None:
    with pytest.raises(ValueError, match="no modules"):
        A2AServerFactory(Registry(), environ={}).create()
    with pytest.raises(TypeError, match="Registry"):
        A2AServerFactory(object(), environ={})

    class HalfStore:
        async def get(self, *a: object) -> None: ...

    with pytest.raises(TypeError, match="missing methods: save, list, delete"):
        A2AServerFactory(build_registry(), environ={}, task_store=HalfStore())

    class NoAuth:
        pass

    with pytest.raises(TypeError, match="authenticate, security_schemes"):
        A2AServerFactory(build_registry(), environ={}, auth=NoAuth())


def test_card_identity_precedence() -> None:
    registry = Registry()
    registry.register("math.add", Add())
    _, card = A2AServerFactory(registry, environ={}).create()
    assert (card.name, card.version) == ("apcore-agent", "0.0.0")
    assert card.description == "apcore agent with 1 skills"
    config = Config(data={"project": {"name": "from-config", "version": "2.1.0"}})
    executor = Executor(registry, config=config)
    _, card = A2AServerFactory(executor, environ={}).create()
    assert (card.name, card.version) == ("from-config", "2.1.0")
    _, card = A2AServerFactory(executor, environ={"A2A_NAME": "from-env"}, version="9").create()
    assert (card.name, card.version) == ("from-env", "9")
    _, card = A2AServerFactory(executor, environ={"A2A_NAME": "env"}, name="kwarg").create()
    assert card.name == "kwarg"


async def test_serve_runs_uvicorn_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.foundation.modules import build_registry
        from apcore_a2a import serve
        serve(build_registry(), port={port}, shutdown_timeout=2)
    """)
    )
    proc = ServerProcess([sys.executable, str(script)], scripts=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/.well-known/agent-card.json", proc=proc)
        for binding, version in [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")]:
            client = await make_client(url, binding, version)
            try:
                task = await send(client, message(data_part({"a": 1, "b": 1}), skill="math.add"))
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                assert task.artifacts[0].parts[0].data.struct_value["sum"] == 2
                task = await send(client, message(Part(text="hey"), skill="text.shout"))
                assert task.artifacts[0].parts[0].text == "HEY!"
            finally:
                await client.close()
        out = proc.output()
    finally:
        # shutdown_timeout=2 and nothing runs: it must exit 0 well within the margin
        stop_process(proc, timeout=2 + 15)
    assert "Traceback" not in out


async def test_cli_serves_examples_to_the_official_client() -> None:
    args = [
        "--extensions-dir",
        str(EXAMPLES / "extensions"),
        "--bindings",
        str(EXAMPLES / "bindings"),
        "--name",
        "examples",
    ]
    port = free_port()
    with cli_server(args, port=port) as (url, _proc):
        card = httpx.get(url + "/.well-known/agent-card.json", verify=TLS).json()
        ids = {s["id"] for s in card["skills"]}
        assert {
            "math.add",
            "text.stats",
            "greet.hello",
            "text.countdown",
            "jobs.sleep",
            "bank.transfer",
        } <= ids
        assert card["name"] == "examples"
        for binding, version in [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")]:
            client = await make_client(url, binding, version)
            try:
                task = await send(client, message(Part(text="Ann"), skill="greet.hello"))
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                assert task.artifacts[0].parts[0].text == "Hello, Ann!"
                task = await send(client, message(data_part({"a": 2, "b": 40}), skill="math.add"))
                assert task.artifacts[0].parts[0].data.struct_value["sum"] == 42
            finally:
                await client.close()


def test_cli_default_skill_and_env(tmp_path: Path) -> None:
    port = free_port()
    env = {"A2A_DEFAULT_SKILL": "greet.hello", "A2A_NAME": "env-named"}
    args = [
        "--bindings",
        str(EXAMPLES / "bindings"),
        "--extensions-dir",
        str(EXAMPLES / "extensions"),
    ]
    with cli_server(args, port=port, env=env) as (url, _proc):
        assert (
            httpx.get(url + "/.well-known/agent-card.json", verify=TLS).json()["name"]
            == "env-named"
        )
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "message/send",
            "params": {
                "message": {
                    "kind": "message",
                    "messageId": "d",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "Bo"}],
                }
            },
        }
        task = httpx.post(url + "/", json=body, timeout=10, verify=TLS).json()["result"]
        assert task["artifacts"][0]["parts"][0]["text"] == "Hello, Bo!"


def test_cli_version() -> None:
    from apcore_a2a import __version__

    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"apcore-a2a {__version__}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--extensions-dir", "/definitely/not/here"], "directory not found: /definitely/not/here"),
        (["--extensions-dir", "{empty}"], "no apcore modules found in"),
        (
            ["--extensions-dir", "{examples}", "--port", "70000"],
            "--port: must be between 1 and 65535",
        ),
        ([], "no modules to serve: give a registry, or module folders"),
        (["--extensions-dir", "{examples}", "--default-skill", "nope"], "default_skill 'nope'"),
    ],
)
def test_cli_validation_errors_exit_1(tmp_path: Path, args: list[str], message: str) -> None:
    filled = [
        a.replace("{empty}", str(tmp_path)).replace("{examples}", str(EXAMPLES / "extensions"))
        for a in args
    ]
    env = {
        k: v for k, v in __import__("os").environ.items() if not k.startswith(("A2A_", "APCORE_"))
    }
    result = run_cli("serve", *filled, env=env)
    assert result.returncode == 1, result.stderr
    lines = [ln for ln in result.stderr.strip().splitlines() if ln]
    assert message in lines[-1]
    assert "Traceback" not in result.stderr


def test_cli_usage_error_exits_2() -> None:
    result = run_cli("serve", "--port", "not-a-number")
    assert result.returncode == 2
    result = run_cli("serve", "--no-such-flag")
    assert result.returncode == 2


def test_built_executor_uses_execution_timeout_for_apcore_limits() -> None:
    factory = A2AServerFactory(build_registry(), environ={}, execution_timeout=45)
    config = factory.executor._config  # apcore has no public getter for it
    assert config.get("executor.default_timeout") == 45_000
    assert config.get("executor.global_timeout") == 45_000
    mine = Executor(build_registry())
    assert A2AServerFactory(mine, environ={}).executor is mine
