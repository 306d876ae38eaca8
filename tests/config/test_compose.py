"""deploy/compose.yaml: `docker compose config` validates it, and its topology (two cluster
replicas on PostgreSQL behind Caddy) runs here without containers: the replicas are the
image install of ``_image.py`` with the compose file's environment, the proxy is Caddy with
deploy/Caddyfile, the database the local PostgreSQL (a schema of its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import GetTaskRequest, TaskState

from tests._postgres import pg_schema_url
from tests._sdk import peer_http, request
from tests._support import EXAMPLES, ROOT, ServerProcess, free_port, stop_process, wait_http
from tests.storage._a2a import send

from ._image import ImageRoot

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
AGENTS = ("agent-1", "agent-2")


def _require(available: bool, what: str) -> None:
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed; CI must install it (docs/deployment.md)")
    pytest.skip(f"{what} is not installed (only skipped outside CI)")


def _has_compose() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0


def _compose_config(path: Path = COMPOSE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("POSTGRES_PASSWORD", "A2A_API_KEYS")}
    return subprocess.run(
        ["docker", "compose", "-f", str(path), "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The compose file as `docker compose config` resolves it."""
    _require(_has_compose(), "docker compose (the Compose CLI plugin)")
    result = _compose_config()
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compose_config_validates_the_topology(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", *AGENTS, "proxy"}
    first, second = (services[name] for name in AGENTS)
    assert first["environment"] == second["environment"]
    assert first["build"] == second["build"] and first["build"]["dockerfile"] == "Dockerfile"
    env = first["environment"]
    assert env["A2A_CLUSTER"] == "true"
    assert (
        env["A2A_TASK_STORE"].startswith("postgresql://agent:")
        and "@postgres:5432/" in env["A2A_TASK_STORE"]
    )
    assert env["A2A_URL"] == "http://localhost:8080"  # the proxy, not one replica
    for agent in (first, second):
        assert agent["depends_on"]["postgres"]["condition"] == "service_healthy"
        (mount,) = agent["volumes"]
        assert mount["target"] == "/app/extensions" and mount["read_only"] is True
        assert Path(mount["source"]) == EXAMPLES / "extensions"
        assert "healthcheck" not in agent  # the image's HEALTHCHECK applies
    assert services["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL"
    proxy = services["proxy"]
    assert {proxy["depends_on"][a]["condition"] for a in AGENTS} == {"service_healthy"}
    assert "/health" in " ".join(proxy["healthcheck"]["test"])
    assert proxy["ports"][0]["published"] == "8080" and proxy["ports"][0]["target"] == 80


def test_stop_grace_period_outlasts_the_agents_shutdown_timeout(compose: dict[str, Any]) -> None:
    image_config = yaml.safe_load((DEPLOY / "agent.yaml").read_text())
    shutdown = float(image_config["limits"]["shutdown_timeout"])
    for name in AGENTS:
        grace = compose["services"][name]["stop_grace_period"]
        assert grace.endswith("s") and float(grace[:-1]) > shutdown


def test_compose_config_rejects_a_broken_file(tmp_path: Path) -> None:
    _require(_has_compose(), "docker compose (the Compose CLI plugin)")
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("stop_grace_period:", "stop_grace_periodd:"))
    result = _compose_config(broken)
    assert result.returncode != 0 and "stop_grace_periodd" in result.stderr


def test_caddyfile_balances_over_the_agent_services() -> None:
    text = (DEPLOY / "Caddyfile").read_text()
    assert "reverse_proxy agent-1:8000 agent-2:8000" in text
    assert "health_uri /health" in text and "flush_interval -1" in text


# -- the topology, without containers ------------------------------------------------------


def _grace(compose: dict[str, Any]) -> float:
    """The compose file's stop_grace_period: docker SIGKILLs a replica still running then."""
    return float(compose["services"][AGENTS[0]]["stop_grace_period"].removesuffix("s"))


@contextlib.contextmanager
def _replica(
    image: ImageRoot, env: dict[str, str], grace: float
) -> Iterator[tuple[str, ServerProcess]]:
    port = free_port()
    proc = ServerProcess(
        image.command(),
        cwd=image.workdir(),
        env=image.env(**env, A2A_HOST="127.0.0.1", A2A_PORT=str(port)),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/health", proc=proc, timeout=180)
        yield base, proc
    finally:
        stop_process(proc, timeout=grace)


@contextlib.contextmanager
def _caddy(tmp_path: Path, port: int, upstreams: dict[str, str]) -> Iterator[str]:
    """deploy/Caddyfile with the agents' service names replaced by local addresses."""
    text = (DEPLOY / "Caddyfile").read_text().replace(":80 {", f"http://127.0.0.1:{port} {{")
    for name, address in upstreams.items():
        text = text.replace(f"{name}:8000", address)
    config = tmp_path / "Caddyfile"
    config.write_text(text)
    home = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    proc = ServerProcess(
        ["caddy", "run", "--adapter", "caddyfile", "--config", str(config)],
        env={**os.environ, **home},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/health", proc=proc, timeout=30)
        yield base
    finally:
        stop_process(proc, timeout=20)


async def test_two_replicas_behind_caddy_share_tasks_and_survive_one_stopping(
    compose: dict[str, Any], image: ImageRoot, tmp_path: Path
) -> None:
    _require(shutil.which("caddy") is not None, "caddy (Debian package caddy)")
    extensions = image.path("/app/extensions")
    shutil.rmtree(extensions)
    shutil.copytree(
        EXAMPLES / "extensions", extensions, ignore=shutil.ignore_patterns("__pycache__")
    )
    proxy_port = free_port()
    with contextlib.ExitStack() as stack:
        # The compose environment, with this machine's database and public URL.
        env = {k: v for k, v in compose["services"]["agent-1"]["environment"].items() if v}
        env["A2A_TASK_STORE"] = stack.enter_context(pg_schema_url(agents=2))
        env["A2A_URL"] = f"http://127.0.0.1:{proxy_port}"
        grace = _grace(compose)
        a, proc_a = stack.enter_context(_replica(image, env, grace))
        b, proc_b = stack.enter_context(_replica(image, env, grace))
        upstreams = {"agent-1": a.removeprefix("http://"), "agent-2": b.removeprefix("http://")}
        proxy = stack.enter_context(_caddy(tmp_path, proxy_port, upstreams))

        config = ClientConfig(streaming=False, httpx_client=peer_http())
        client = await ClientFactory(config).create_from_url(proxy)
        tasks = [await send(client, request("math.add", {"a": i, "b": 1})) for i in range(4)]
        assert all(t.status.state == TaskState.TASK_STATE_COMPLETED for t in tasks)
        for replica in (a, b):  # every task is visible on each replica
            direct = await _bound_client(replica)
            for t in tasks:
                assert (await direct.get_task(GetTaskRequest(id=t.id))).artifacts == t.artifacts

        # One replica stops: the proxy keeps serving through the other, and back.
        stop_process(proc_a, timeout=grace)
        late = await send(client, request("math.add", {"a": 5, "b": 5}))
        assert late.status.state == TaskState.TASK_STATE_COMPLETED
        assert httpx.get(proxy + "/health").status_code == 200
        a2, _proc = stack.enter_context(_replica(image, env, grace))
        assert a2 != a  # a new port; the proxy only knows the stopped address and b
        stop_process(proc_b, timeout=grace)
        # No upstream left: the proxy answers a gateway error, which the SDK client raises
        # with its status: 502 while Caddy still dials the stopped replicas, 503 once its
        # health check has marked them down.
        with pytest.raises(A2AClientError, match=r"HTTP Error 50[23]"):
            await send(client, request("math.add", {"a": 1, "b": 1}))
        direct = await _bound_client(a2)
        got = await direct.get_task(GetTaskRequest(id=late.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED  # written via b, read via a2


async def _bound_client(base: str) -> Any:
    """An SDK client whose card interfaces point at *base* (a proxy or one replica)."""
    from a2a.client import A2ACardResolver

    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base).get_agent_card()
    public = card.supported_interfaces[0].url.split("/")[:3]
    for interface in card.supported_interfaces:
        interface.url = interface.url.replace("/".join(public), base, 1)
    return ClientFactory(ClientConfig(streaming=False, httpx_client=peer_http())).create(card)
