from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ._agent import Agent, agent_server


@pytest.fixture
async def agent(caplog: pytest.LogCaptureFixture) -> AsyncIterator[Agent]:
    """The lifecycle agent with default settings."""
    async with agent_server(caplog) as served:
        yield served
