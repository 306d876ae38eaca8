"""The uvicorn behaviour ``apcore_a2a/upstream/skipped_lifespans.py`` answers: a second
Ctrl-C (``force_exit``) that comes before ``Server.shutdown`` sends the lifespan its
shutdown skips it, and the app never closes what it opened. A failure of the first test
means uvicorn runs it all the same: delete that file.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import uvicorn

from apcore_a2a.upstream.skipped_lifespans import finish_lifespan
from tests._support import free_port


class _Lifespan:
    """An ASGI app that notes the lifespan messages it receives."""

    def __init__(self) -> None:
        self.received: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"
        while True:
            message = await receive()
            self.received.append(message["type"])
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return


async def _forced_stop(server_class: type[uvicorn.Server]) -> list[str]:
    app = _Lifespan()
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_config=None)
    server = server_class(config)
    serving = asyncio.ensure_future(server.serve())
    async with asyncio.timeout(30):
        while not server.started:
            await asyncio.sleep(0.01)
    # What two quick SIGINTs leave: the first asks for a stop, the second forces it.
    server.should_exit = server.force_exit = True
    async with asyncio.timeout(30):
        await serving
    return app.received


async def test_uvicorn_skips_the_lifespan_shutdown_of_a_forced_stop() -> None:
    assert await _forced_stop(uvicorn.Server) == ["lifespan.startup"]


async def test_the_correction_runs_it() -> None:
    class Finishing(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets)
            await finish_lifespan(self)

    assert await _forced_stop(Finishing) == ["lifespan.startup", "lifespan.shutdown"]


async def test_a_lifespan_shutdown_that_ran_is_not_run_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second Ctrl-C during the lifespan's shutdown: uvicorn ran it already."""
    caplog.set_level(logging.INFO, logger="uvicorn.error")

    class Finishing(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            self.force_exit = False  # forced only once the lifespan's shutdown is done
            await super().shutdown(sockets)
            self.force_exit = True
            await finish_lifespan(self)

    assert await _forced_stop(Finishing) == ["lifespan.startup", "lifespan.shutdown"]
    assert caplog.text.count("Waiting for application shutdown") == 1, caplog.text
