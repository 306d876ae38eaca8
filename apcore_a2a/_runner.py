"""Run one agent app with uvicorn, stopping gracefully (drain, then exit 0)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.applications import Starlette

from apcore_a2a.settings import Settings

__all__ = ["run_app"]

logger = logging.getLogger("apcore_a2a")


def _graceful_server_class() -> type[Any]:
    import asyncio

    import uvicorn

    from apcore_a2a.ops.shutdown import drain

    class GracefulServer(uvicorn.Server):
        """uvicorn re-raises SIGTERM/SIGINT after shutting down, ending the process with
        -15; a graceful stop should exit 0, as service managers and containers expect.

        On shutdown it stops accepting first, then drains the agent's running tasks
        (a task started with returnImmediately holds no connection uvicorn would wait
        for), and only then lets uvicorn wait for the remaining connections.
        """

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()

        async def shutdown(self, sockets: Any = None) -> None:
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            for connection in list(self.server_state.connections):
                connection.shutdown()
            state = getattr(getattr(self.config.app, "state", None), "a2a", None)
            if state is not None:
                draining = asyncio.ensure_future(drain(state, state.settings.shutdown_timeout))
                # A second Ctrl-C (force_exit) stops waiting for the tasks.
                while not draining.done() and not self.force_exit:
                    await asyncio.wait({draining}, timeout=0.1)
                if not draining.done():
                    draining.cancel()
            await super().shutdown(sockets)

    return GracefulServer


def run_app(app: Starlette, settings: Settings, sockets: list[Any] | None = None) -> None:
    """Run *app* with uvicorn using *settings* (host, port, log level, shutdown timeout).

    With *sockets* (a worker of ``workers=N``) uvicorn serves those instead of binding.

    Logging is set up from *settings* (``log_level``, ``log_format``) unless the
    application configured handlers of its own; uvicorn's records use the same format.
    """
    import uvicorn

    from apcore_a2a import _logging

    _logging.configure(settings, force=False)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=max(1, round(settings.shutdown_timeout)),
        lifespan="on",
        access_log=False,
        log_config=None,
    )
    server = _graceful_server_class()(config)
    if sockets is None:
        logger.info("Serving A2A agent at %s", settings.public_url())
    server.run(sockets=sockets)
