from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from apcore import Executor

from apcore_a2a import A2AServerFactory
from tests._support import free_port, threaded_server
from tests.foundation.modules import build_registry


def serve_in_thread(target: Any, **settings: Any) -> Any:
    port = free_port()
    app, _ = A2AServerFactory(target, environ={}, port=port, **settings).create()
    return threaded_server(app, port=port)


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    """A multi-skill agent (no default skill) on a real uvicorn server."""
    with serve_in_thread(build_registry(), name="test-agent") as url:
        yield url


@pytest.fixture(scope="module")
def single_url() -> Iterator[str]:
    """An agent with exactly one skill (math.add)."""
    with serve_in_thread(Executor(build_registry(single=True))) as url:
        yield url


@pytest.fixture(scope="module")
def default_url() -> Iterator[str]:
    """A multi-skill agent whose default skill is text.shout."""
    with serve_in_thread(build_registry(), default_skill="text.shout") as url:
        yield url
