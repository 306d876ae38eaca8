"""Fixtures of the reliability suite: agents in their own processes, shared per module."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests._support import TLS

from . import _report
from ._hostile import Hostile, assert_healthy, seed_tasks
from ._serve import agent_process


@pytest.fixture(scope="session", autouse=True)
def _write_report() -> Iterator[None]:
    yield
    _report.flush()


@pytest.fixture(scope="session")
def hostile_agent() -> Iterator[Hostile]:
    """One agent process for every hostile-input property, plus a few tasks to aim at.

    Push notifications are on (insecure URLs off), so push-config methods are exercised
    too; the module-scoped teardown checks that the agent is still healthy.
    """
    with (
        agent_process(push_notifications=True, execution_timeout=10.0) as served,
        httpx.Client(base_url=served.url, timeout=30, verify=TLS) as http,
    ):
        task_ids = seed_tasks(http)
        yield Hostile(served, http, task_ids)
        assert_healthy(served, http)
