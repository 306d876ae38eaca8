"""One agent per test module, serving JSON-RPC, REST and gRPC (1.0 + 0.3) side by side."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.bindings._agent import HOSTS, Agent, serve_agent


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
