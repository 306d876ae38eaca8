"""deploy/compose.yaml: `docker compose config` validates it, and its topology (two cluster
replicas on PostgreSQL behind Caddy) runs here without containers: the replicas are the
image install of ``_image.py`` with the compose file's environment, the proxy is Caddy with
deploy/Caddyfile, the database the local PostgreSQL (a schema of its own).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
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
from tests._support import (
    EXAMPLES,
    ROOT,
    ServerProcess,
    free_port,
    not_installed,
    stop_process,
    wait_http,
)
from tests.storage._a2a import send

from ._image import ImageRoot

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
AGENTS = ("agent-1", "agent-2")


def _require(available: bool, what: str) -> None:
    if not available:
        not_installed(what)


def _has_compose() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0


# What a user puts in deploy/.env: the compose file has no default database password.
DOTENV = {"POSTGRES_PASSWORD": "s3cret-from-dotenv"}


def _compose_config(
    path: Path = COMPOSE, dotenv: dict[str, str] = DOTENV
) -> subprocess.CompletedProcess[str]:
    unset = ("POSTGRES_PASSWORD", "A2A_API_KEYS", "PROXY_BIND", "PROXY_PORT")
    env = {k: v for k, v in os.environ.items() if k not in unset} | dotenv
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
    assert env["A2A_TASK_STORE"] == "postgresql://agent:s3cret-from-dotenv@postgres:5432/agent"
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == "s3cret-from-dotenv"
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


def test_only_the_proxy_is_published_and_on_loopback_by_default(compose: dict[str, Any]) -> None:
    services = compose["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}  # PostgreSQL and the replicas stay on the compose network
    (port,) = services["proxy"]["ports"]
    # Without A2A_API_KEYS the agent takes anonymous calls: not on every interface unasked.
    assert port["host_ip"] == "127.0.0.1"


def test_the_replicas_trust_forwarded_headers_from_the_proxy_only(compose: dict[str, Any]) -> None:
    (network,) = compose["services"]["proxy"]["networks"].values()
    proxy_address = ipaddress.ip_address(network["ipv4_address"])
    (subnet,) = compose["networks"]["default"]["ipam"]["config"]
    assert proxy_address in ipaddress.ip_network(subnet["subnet"])
    for name in AGENTS:
        trusted = compose["services"][name]["environment"]["A2A_FORWARDED_ALLOW_IPS"]
        assert trusted == str(proxy_address)  # not "*", not the whole network


def test_the_replicas_run_without_privileges(compose: dict[str, Any]) -> None:
    for name in AGENTS:
        agent = compose["services"][name]
        assert agent["read_only"] is True and agent["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in agent["security_opt"]


def test_compose_refuses_to_start_without_a_database_password() -> None:
    _require(_has_compose(), "docker compose (the Compose CLI plugin)")
    result = _compose_config(dotenv={})
    assert result.returncode != 0 and "POSTGRES_PASSWORD" in result.stderr, result.stderr


def test_stop_grace_period_outlasts_the_agents_exit_bound(compose: dict[str, Any]) -> None:
    """docs/operations.md, *Graceful shutdown*: SIGTERM ends the process within
    ``shutdown_timeout`` (rounded up) + 3 s + ``shutdown_force_timeout``."""
    from apcore_a2a.settings import Settings

    limits = yaml.safe_load((DEPLOY / "agent.yaml").read_text())["limits"]
    defaults = Settings()
    shutdown = float(limits.get("shutdown_timeout", defaults.shutdown_timeout))
    force = float(limits.get("shutdown_force_timeout", defaults.shutdown_force_timeout))
    bound = math.ceil(shutdown) + 3 + force
    for name in AGENTS:
        grace = compose["services"][name]["stop_grace_period"]
        assert grace.endswith("s") and float(grace[:-1]) > bound


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


def _caddy_json() -> dict[str, Any]:
    """deploy/Caddyfile as Caddy itself reads it (``caddy adapt``)."""
    _require(shutil.which("caddy") is not None, "caddy (Debian package caddy)")
    result = subprocess.run(
        ["caddy", "adapt", "--adapter", "caddyfile", "--config", str(DEPLOY / "Caddyfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def _handlers(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "handler" in node:
            yield node
        for value in node.values():
            yield from _handlers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _handlers(value)


def test_caddy_bounds_slow_request_headers() -> None:
    """uvicorn has no timeout for reading a request's headers: the proxy bounds it."""
    (server,) = _caddy_json()["apps"]["http"]["servers"].values()
    read_header = server["read_header_timeout"]
    assert 0 < read_header <= 30 * 10**9  # nanoseconds


def test_caddy_sets_security_headers() -> None:
    (server,) = _caddy_json()["apps"]["http"]["servers"].values()
    (headers,) = (h for h in _handlers(server) if h["handler"] == "headers")
    assert headers["response"]["set"]["X-Content-Type-Options"] == ["nosniff"]
    assert "Server" in headers["response"]["delete"]


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
    """deploy/Caddyfile with the agents' service names replaced by local addresses.

    The addresses are IPv4-mapped IPv6 (``[::ffff:127.0.0.1]:PORT``): like ``agent-1:8000``
    in compose, not one of the loopback names a replica answers by default, so Caddy's
    health checks name the replica as they do in compose."""
    text = (DEPLOY / "Caddyfile").read_text().replace(":80 {", f"http://127.0.0.1:{port} {{")
    for name, address in upstreams.items():
        text = text.replace(f"{name}:8000", address.replace("127.0.0.1", "[::ffff:127.0.0.1]"))
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
        env["A2A_FORWARDED_ALLOW_IPS"] = "127.0.0.1"  # the address the local Caddy dials from
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
        health = httpx.get(proxy + "/health")
        assert health.status_code == 200
        assert health.headers["x-content-type-options"] == "nosniff"
        assert "server" not in health.headers  # neither Caddy's nor uvicorn's name
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
