"""The image and deploy/compose.yaml, without a container engine.

The Dockerfile's install is replayed in a fresh venv (``_image.ImageRoot``) and started with
the image's command and env vars. Deviations from ``docker run``: image paths live under a
temporary folder, and ``A2A_HOST``/``A2A_PORT`` are overridden (as ``docker run -e`` would)
so the server binds 127.0.0.1 on a free port.

`docker compose config` validates the compose file, and its topology (two cluster replicas
on PostgreSQL behind Caddy) runs here: the replicas are that image install with the compose
file's environment, the proxy is Caddy with deploy/Caddyfile, the database the local
PostgreSQL (a schema of its own).

Every test of the image is in this one file: the install is the suite's costliest fixture,
and each pytest-xdist process that needs it builds its own.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import re
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
    TLS,
    ServerProcess,
    free_port,
    not_installed,
    stop_process,
    wait_http,
)
from tests.storage._a2a import send

from ._dockerfile import dockerignore_allows, instructions
from ._image import DOCKERFILE, IMAGE_PATHS, SYSTEM_PATHS, ImageRoot

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
        health = httpx.get(proxy + "/health", verify=TLS)
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

    async with httpx.AsyncClient(verify=TLS) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
    public = card.supported_interfaces[0].url.split("/")[:3]
    for interface in card.supported_interfaces:
        interface.url = interface.url.replace("/".join(public), base, 1)
    return ClientFactory(ClientConfig(streaming=False, httpx_client=peer_http())).create(card)


def test_dockerfile_shape() -> None:
    from ._dockerfile import parse

    build, runtime = parse(DOCKERFILE)
    assert build.base.startswith("python:3.11-slim") and runtime.base == build.base
    assert runtime.user not in ("", "root", "0")
    assert runtime.healthcheck and "/health" in " ".join(runtime.healthcheck)
    assert runtime.stopsignal == "SIGTERM" and runtime.entrypoint == ["apcore-a2a"]
    # The runtime stage installs nothing: no compilers or package managers in its layers.
    runtime_runs = " ".join(str(step) for kind, step in runtime.steps if kind == "RUN")
    assert not re.search(r"apt-get|apk |pip |gcc|build-essential", runtime_runs)
    # Every file the build copies reaches the build context through .dockerignore.
    for stage in (build, runtime):
        for kind, step in stage.steps:
            if kind == "COPY" and step[2] is None:  # type: ignore[index]
                for source in step[0]:  # type: ignore[index]
                    assert (ROOT / source).exists(), source
                    assert dockerignore_allows(ROOT / ".dockerignore", source), source
    assert not dockerignore_allows(ROOT / ".dockerignore", "tests/config/conftest.py")
    assert not dockerignore_allows(ROOT / ".dockerignore", ".venv/bin/python")
    # The replay below maps every absolute path the Dockerfile uses.
    text = " ".join(rest for _kw, rest in instructions(DOCKERFILE.read_text(encoding="utf-8")))
    for path in re.findall(r"(?<=[\s\"'=\[])(/[\w.-]+(?:/[\w.-]+)*)", text):
        assert path.startswith(IMAGE_PATHS + SYSTEM_PATHS), path


@pytest.fixture
def container(image: ImageRoot) -> Iterator[tuple[str, ServerProcess, ImageRoot]]:
    """`docker run -v examples/extensions:/app/extensions:ro IMAGE` (default command)."""
    extensions = image.path("/app/extensions")
    shutil.rmtree(extensions)
    shutil.copytree(
        EXAMPLES / "extensions", extensions, ignore=shutil.ignore_patterns("__pycache__")
    )
    port = free_port()
    env = image.env(A2A_HOST="127.0.0.1", A2A_PORT=str(port))
    proc = ServerProcess(image.command(), cwd=image.workdir(), env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/health", proc=proc, timeout=180)
        yield base, proc, image
    finally:
        stop_process(proc, timeout=_shutdown_timeout())


def _shutdown_timeout() -> float:
    """The image's ``limits.shutdown_timeout`` (deploy/agent.yaml)."""
    config = yaml.safe_load((ROOT / "deploy" / "agent.yaml").read_text())
    return float(config["limits"]["shutdown_timeout"])


def _healthcheck(image: ImageRoot, port: str) -> int:
    env = image.env(A2A_HOST="127.0.0.1", A2A_PORT=port)
    return subprocess.run(image.healthcheck(), env=env, capture_output=True, timeout=120).returncode


def test_image_serves_checks_health_and_stops_on_sigterm(
    container: tuple[str, ServerProcess, ImageRoot],
) -> None:
    base, proc, image = container
    port = base.rsplit(":", 1)[1]
    # The console script comes from the image's venv, not from this checkout.
    installed = image.path("/opt/venv/bin/apcore-a2a")
    assert installed.is_file() and image.command()[0] == "apcore-a2a"
    assert _healthcheck(image, port) == 0

    card = httpx.get(base + "/.well-known/agent-card.json", verify=TLS).json()
    assert "math.add" in {s["id"] for s in card["skills"]}
    reply = httpx.post(
        base + "/",
        headers={"A2A-Version": "1.0"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "role": "ROLE_USER",
                    "messageId": "m-1",
                    "parts": [{"data": {"a": 2, "b": 3}}],
                    "metadata": {"skillId": "math.add"},
                }
            },
        },
        timeout=30,
        verify=TLS,
    ).json()
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
    assert reply["result"]["task"]["artifacts"][0]["parts"] == [{"data": {"sum": 5.0}}]
    # The image's default store: SQLite on the /data volume.
    assert image.path("/data/tasks.db").is_file()

    # Nothing runs: the server exits 0 within the image's shutdown timeout (the compose
    # file's stop_grace_period outlasts it), so docker never has to SIGKILL it.
    stop_process(proc, timeout=_shutdown_timeout())
    assert _healthcheck(image, port) != 0  # the HEALTHCHECK does fail when nothing answers
    # Extensions can be mounted read-only: nothing was written beside them.
    assert not list(image.path("/app/extensions").rglob("__pycache__"))
    log = proc.output()
    assert "Traceback" not in log, log


def test_image_takes_a_mounted_config_file(
    image: ImageRoot, tmp_path: pytest.TempPathFactory
) -> None:
    """`docker run -v ./agent.yaml:/etc/apcore-a2a/agent.yaml:ro IMAGE` with a bad file."""
    bad = image.path("/etc/apcore-a2a/bad.yaml")
    bad.write_text("storage:\n  tasks: memory://\n")
    env = image.env(A2A_HOST="127.0.0.1", A2A_PORT=str(free_port()))
    result = subprocess.run(
        image.command("serve", "--config", "/etc/apcore-a2a/bad.yaml"),
        cwd=image.workdir(),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith("did you mean 'storage.task_store'?")
