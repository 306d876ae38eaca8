"""One agent per test module, serving JSON-RPC, REST and gRPC (1.0 + 0.3) side by side:
the scenario agent (``agent``, ``hosted_agent``) or the module-output one (``agent_url``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bindings._agent import HOSTS, Agent, serve_agent
from tests.bindings._outputs_agent import serve_outputs


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    """The scenario agent, with push notifications on (insecure URLs allowed for tests)."""
    with serve_agent(push_notifications=True, push_allow_insecure_urls=True) as running:
        yield running


@pytest.fixture(scope="module", params=HOSTS)
def hosted_agent(request: pytest.FixtureRequest) -> Iterator[Agent]:
    """The scenario agent on its own, and mounted at /agent in a Starlette and a FastAPI app
    that do not run its lifespan: the same scenarios must give the same answers."""
    with serve_agent(
        request.param, push_notifications=True, push_allow_insecure_urls=True
    ) as running:
        yield running


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    """The base URL of the module-output agent (``_outputs_agent.py``), default settings."""
    with serve_outputs() as url:
        yield url
