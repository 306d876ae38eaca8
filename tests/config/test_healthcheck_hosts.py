"""The image's HEALTHCHECK against an agent that names its public host (``--allowed-host``).

The check runs inside the container and asks ``http://127.0.0.1:PORT/health``; an
``allowed_hosts`` list naming only the public host must not make the container unhealthy.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests._support import cli_server, free_port

from ._dockerfile import parse
from ._helpers import EXTENSIONS, clean_env
from ._image import DOCKERFILE


def _healthcheck(port: int) -> subprocess.CompletedProcess[str]:
    _build, runtime = parse(DOCKERFILE)
    command = [sys.executable if word == "python" else word for word in runtime.healthcheck]
    env = {**os.environ, "A2A_PORT": str(port)}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_the_image_healthcheck_passes_with_an_explicit_allowed_host() -> None:
    port = free_port()
    args = ["--extensions-dir", str(EXTENSIONS), "--allowed-host", "agent.example.com"]
    with cli_server(args, port=port, env=clean_env()) as (_base, _proc):
        result = _healthcheck(port)
        assert result.returncode == 0, result.stderr
