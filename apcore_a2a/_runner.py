"""Run one agent app with uvicorn: graceful stop (drain, exit 0), one-line start-up errors."""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from starlette.applications import Starlette

from apcore_a2a.settings import Settings
from apcore_a2a.upstream.uvicorn_signals import graceful_exit

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

    from apcore_a2a.ops.shutdown import drain

    class GracefulServer(uvicorn.Server):
        """uvicorn that drains the agent's running tasks while it shuts down.

        uvicorn's shutdown stops accepting, then waits for open connections, and sends
        the lifespan shutdown last. A task started with returnImmediately holds no
        connection, and a stream of a task that outlives ``shutdown_timeout`` would be
        cut before its ``canceled`` event, so the drain starts with the shutdown, right
        after the listeners close, and runs alongside uvicorn's wait for connections
        (``timeout_graceful_shutdown`` covers the drain plus STREAM_FLUSH_SECONDS).
        """

        async def shutdown(self, sockets: Any = None) -> None:
            state = getattr(getattr(self.config.app, "state", None), "a2a", None)
            draining = None
            if state is not None:
                draining = asyncio.ensure_future(drain(state, state.settings.shutdown_timeout))
            try:
                await super().shutdown(sockets)
            finally:
                if draining is not None and not draining.done():  # a second Ctrl-C
                    draining.cancel()

    return GracefulServer


#: After ``shutdown_timeout``, how long open connections get to finish (streams, their
#: last event) before uvicorn closes them.
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
        timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout) + STREAM_FLUSH_SECONDS,
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
        with graceful_exit():
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
