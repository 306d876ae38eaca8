"""Suite-wide test configuration, and a port already taken."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# Property tests explore new inputs on a developer's machine but are repeatable in CI:
# a CI run must pass or fail for the code, not for the draw.
settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture
def taken_port() -> Iterator[str]:
    """A port another socket listens on: were a refused setting accepted, ``serve`` would
    stop there (exit 3) rather than serve until the test times out."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield str(listener.getsockname()[1])
