"""The Dockerfile's install in a fresh venv, started with the image's command and env vars.

This machine has no container engine; ``_image.ImageRoot`` replays the Dockerfile instead.
Deviations from ``docker run``: image paths live under a temporary folder, and
``A2A_HOST``/``A2A_PORT`` are overridden (as ``docker run -e`` would) so the server binds
127.0.0.1 on a free port.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator

import httpx
import pytest
import yaml

from tests._support import EXAMPLES, ROOT, ServerProcess, free_port, stop_process, wait_http

from ._dockerfile import dockerignore_allows, instructions
from ._image import DOCKERFILE, IMAGE_PATHS, SYSTEM_PATHS, ImageRoot


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

    card = httpx.get(base + "/.well-known/agent-card.json").json()
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
