"""One agent per session for the interop suite: JSON-RPC, REST and gRPC, 1.0 and 0.3.

It runs as ``python -m apcore_a2a serve`` (the way users start it) on free ports, with push
notifications on (the webhook is on 127.0.0.1, hence ``--push-allow-insecure-urls``) and the
modules of ``extensions/``. Each peer then runs as its own process against it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support import (
    CLI_STOP_TIMEOUT,
    ROOT,
    free_port,
    stop_process,
    threaded_server,
    wait_http,
)
from tests.interop._runs import Runs, Target
from tests.interop._webhook import Webhook

EXTENSIONS = Path(__file__).resolve().parent / "extensions"
AGENT_NAME = "interop-agent"


@pytest.fixture(scope="session")
def webhook() -> Iterator[tuple[Webhook, str]]:
    hook = Webhook()
    with threaded_server(hook.app()) as url:
        yield hook, url


@pytest.fixture(scope="session")
def interop_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    port, grpc_port = free_port(), free_port()
    cmd = [
        sys.executable,
        "-m",
        "apcore_a2a",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--extensions-dir",
        str(EXTENSIONS),
        "--name",
        AGENT_NAME,
        "--grpc-port",
        str(grpc_port),
        "--push-notifications",
        "--push-allow-insecure-urls",
    ]
    # The log goes to a file: a pipe nobody reads would block the agent once full.
    log = tmp_path_factory.mktemp("interop") / "agent.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, cwd=str(ROOT), env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_http(url + "/.well-known/agent-card.json", proc=proc)
            yield Target(url=url, grpc=f"127.0.0.1:{grpc_port}", webhook="")
        finally:
            stop_process(proc, timeout=CLI_STOP_TIMEOUT)


@pytest.fixture(scope="session")
def runs(interop_agent: Target, webhook: tuple[Webhook, str]) -> Iterator[Runs]:
    target = Target(url=interop_agent.url, grpc=interop_agent.grpc, webhook=webhook[1])
    cached = Runs(target)
    try:
        yield cached
    finally:
        cached.close()
