"""Run one agent app with uvicorn: graceful stop (drain, exit 0), one-line start-up errors."""

from __future__ import annotations

import logging
import re
from typing import Any

from starlette.applications import Starlette

from apcore_a2a.settings import Settings

__all__ = ["StartupError", "run_app", "store_hint"]

logger = logging.getLogger("apcore_a2a")

#: What to check when the task store cannot be reached at start.
_STORE_HINT = "is the database running, and does --task-store (A2A_TASK_STORE) name it?"
_PORT_HINT = "is another server on that port? Choose another with --port (A2A_PORT)"
_UVICORN_FAILED = "Application startup failed. Exiting."
#: SQLite's and PostgreSQL's words for a table or column the running code expects.
_OLD_SCHEMA = re.compile(
    r"no such (column|table)|(column|relation) \S+ does not exist|Undefined(Column|Table)"
)


class StartupError(RuntimeError):
    """The agent was built but could not start: its task store unreachable, a port taken.

    The message is one line saying what failed and what to check; the CLI prints it and
    exits with status 3.
    """


def _graceful_server_class() -> type[Any]:
    import asyncio

    import uvicorn
    from sse_starlette.sse import AppStatus

    from apcore_a2a.ops.shutdown import drain

    class GracefulServer(uvicorn.Server):
        """uvicorn re-raises SIGTERM/SIGINT after shutting down, ending the process with
        -15; a graceful stop should exit 0, as service managers and containers expect.

        On shutdown it stops accepting first, then drains the agent's running tasks
        (a task started with returnImmediately holds no connection uvicorn would wait
        for), and only then lets the SSE streams end and uvicorn wait for the remaining
        connections. sse-starlette would otherwise start closing streams at the signal,
        racing the drain: on a starved CPU a stream was cut before the ``canceled``
        event the drain had just produced. Here a stream's end follows its last event.
        """

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()

        def run(self, sockets: Any = None) -> None:
            # sse-starlette's watch is process-wide; serve() owns the process.
            automatic = AppStatus.enable_automatic_graceful_drain
            AppStatus.enable_automatic_graceful_drain = False
            try:
                super().run(sockets=sockets)
            finally:
                AppStatus.should_exit = False
                AppStatus.enable_automatic_graceful_drain = automatic

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
            # Every task has its final event now; streams write it and end. What still
            # streams then (a subscriber of a task waiting for input) gets
            # STREAM_FLUSH_SECONDS (uvicorn's graceful timeout) before uvicorn closes it.
            AppStatus.should_exit = True
            await super().shutdown(sockets)

    return GracefulServer


#: After the drain, how long open connections get to finish (streams, their last event).
STREAM_FLUSH_SECONDS = 3


def run_app(app: Starlette, settings: Settings, sockets: list[Any] | None = None) -> None:
    """Run *app* with uvicorn using *settings* (host, port, log level, shutdown timeout).

    With *sockets* (a worker of ``workers=N``) uvicorn serves those instead of binding.
    Raises :class:`StartupError` (one line) when the app cannot start.

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
        timeout_graceful_shutdown=STREAM_FLUSH_SECONDS,
        lifespan="on",
        access_log=False,
        log_config=None,
    )
    watch = _StartupWatch(app)
    config.app = watch
    server = _graceful_server_class()(config)
    if sockets is None:
        logger.info("Serving A2A agent at %s", settings.public_url())
    errors = _StartupErrors(server)
    # Not a logger of ours: its start-up error lines are kept for the StartupError.
    logging.getLogger("uvicorn.error").addFilter(errors)
    try:
        server.run(sockets=sockets)
    except SystemExit as exc:  # uvicorn's exit on a failed start-up
        if watch.error is not None:
            raise StartupError(_describe(watch.error)) from None
        said = [m for m in errors.messages if m != _UVICORN_FAILED]
        if said and "address already in use" in said[-1]:
            raise StartupError(f"{said[-1]}; {_PORT_HINT}") from None
        raise StartupError(said[-1] if said else f"start-up failed (exit {exc.code})") from None
    finally:
        logging.getLogger("uvicorn.error").removeFilter(errors)


def store_hint(message: str) -> str:
    """What to do about a task store that failed with *message* (a clause to append)."""
    if "no schema has been selected" in message or "InvalidSchemaName" in message:
        found = re.search(r"[?&]schema=([^&\s)]+)", message)
        name = found.group(1) if found else "NAME"
        return (
            f"the schema {name!r} the URL names does not exist; create it "
            f"(CREATE SCHEMA {name};) or drop ?schema= from the URL"
        )
    if "max_connections" in message:
        return "docs/deployment.md counts the connections an agent holds"
    if _OLD_SCHEMA.search(message):
        return (
            "the database's tables are from an older version: run "
            "`apcore-a2a db upgrade` with the same --task-store first"
        )
    return _STORE_HINT


def _describe(error: BaseException) -> str:
    from apcore_a2a.storage import StoreUnavailableError

    message = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, StoreUnavailableError):
        return f"{message}; {store_hint(message)}"
    if isinstance(error, OSError | ValueError):
        return message
    return f"start-up failed: {type(error).__name__}: {message}"


class _StartupErrors(logging.Filter):
    """Keeps uvicorn's error lines until the server has started, for one StartupError."""

    def __init__(self, server: Any) -> None:
        super().__init__()
        self.server = server
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and not self.server.started:
            self.messages.append(record.getMessage())
            return False
        return True


class _StartupWatch:
    """Wraps the app for uvicorn: a failed lifespan start-up is kept, not printed.

    Starlette reports the failure to uvicorn with the whole traceback as its message,
    which uvicorn logs; here the message is dropped and the exception kept, so
    :func:`run_app` can raise one :class:`StartupError` line instead. Everything else
    passes through unchanged.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.error: BaseException | None = None

    def __getattr__(self, name: str) -> Any:  # app.state, app.router... for uvicorn/tests
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def quiet_send(message: Any) -> None:
            if message.get("type") == "lifespan.startup.failed":
                message = {"type": "lifespan.startup.failed", "message": ""}
            await send(message)

        try:
            await self.app(scope, receive, quiet_send)
        except Exception as exc:
            if self.error is None:
                self.error = exc
