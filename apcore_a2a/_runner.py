"""``serve()`` and ``async_serve()``: run an agent app with uvicorn (graceful stop: drain,
exit 0; one-line start-up errors), in one process or, with ``workers=N``, in N
(docs/deployment.md). Only :mod:`apcore_a2a.server.factory` knows how the app is wired.

Each worker listens with ``SO_REUSEPORT``, so the kernel spreads connections evenly: one
shared accepting socket would let the first idle process take nearly all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette

from apcore_a2a.adapters.errors import message_line
from apcore_a2a.settings import Settings
from apcore_a2a.upstream.request_heads import HEAD_LIMIT, bounded_head_protocol
from apcore_a2a.upstream.uvicorn_signals import graceful_exit

if TYPE_CHECKING:
    from apcore_a2a.server.factory import A2AServerFactory

logger = logging.getLogger("apcore_a2a")

_PORT_HINT = "is another server on that port? Choose another with --port (A2A_PORT)"
_UVICORN_FAILED = "Application startup failed. Exiting."
#: seconds a kept-alive connection idles with ``header_timeout`` 0 (no bound: a proxy bounds it)
_NO_BOUND = 365 * 24 * 3600
#: SQLite's and PostgreSQL's words for a table or column the running code expects.
_OLD_SCHEMA = re.compile(
    r"no such (column|table)|(column|relation) \S+ does not exist|Undefined(Column|Table)"
)


class StartupError(RuntimeError):
    """The agent was built but could not start (task store unreachable, port taken): one
    line saying what failed and what to check; the CLI prints it and exits 3."""


def async_serve(registry_or_executor: Any = None, **kwargs: Any) -> Starlette:
    """Build the agent as a Starlette (ASGI) app to mount or run yourself.

    Takes the same keyword arguments as :func:`serve`. Example::

        app = async_serve(registry, name="calc")
        # uvicorn.run(app) or Mount("/agent", app=app)
    """
    from apcore_a2a.server.factory import A2AServerFactory

    return A2AServerFactory(registry_or_executor, **kwargs).create()[0]


def serve(registry_or_executor: Any = None, **kwargs: Any) -> None:
    """Serve an apcore Registry or Executor as an A2A agent (blocks until stopped).

    Keyword arguments are the fields of :class:`~apcore_a2a.settings.Settings` (``host``,
    ``port``, ``name``, ``url``, ``default_skill``, ``execution_timeout``,
    ``shutdown_timeout``, ``workers``...), plus ``task_store`` (URL or TaskStore), ``auth``
    (Authenticator) and ``config`` (an agent YAML file; keyword arguments and environment
    variables win over it; with no registry given, the file's modules are served:
    ``serve(config="agent.yaml")``). SIGINT/SIGTERM stop the server gracefully within
    ``shutdown_timeout``; a second Ctrl-C that leaves tasks running raises
    ``SystemExit(1)``, and a third ends the process at once (``os._exit(1)``, unless
    ``shutdown_force_timeout`` is 0); a wrapper's forward of a Ctrl-C is that Ctrl-C
    (docs/operations.md). ``workers`` > 1 needs the main thread (else StartupError).

    Like ``uvicorn.run``, ``serve()`` owns the process: it installs SIGINT/SIGTERM
    handlers, and when a module ignores its cancel at the stop (a ``def execute``
    blocked in its thread), it ends the whole process with ``os._exit(1)``
    ``shutdown_force_timeout`` seconds after the drain (``shutdown_timeout`` rounded up,
    plus 3 s), even if ``serve()`` has returned by then: nothing else could end that call,
    and the interpreter would wait for its thread at exit (a Ctrl-C meanwhile ends it at
    once). A host program with its own work to finish passes ``shutdown_force_timeout=0``:
    never forced, the process then waits for such a module. To keep the process entirely
    yours, run the app of :func:`async_serve` with your own server instead.

    Example::

        from apcore import Registry
        from apcore_a2a import serve

        registry = Registry(extensions_dir="./extensions")
        registry.discover()
        serve(registry, port=8000)
    """
    from apcore_a2a.server.factory import A2AServerFactory

    if code := run(A2AServerFactory(registry_or_executor, standalone=True, **kwargs)):
        raise SystemExit(code)


def run_app(
    app: Starlette,
    settings: Settings,
    sockets: list[Any] | None = None,
    on_started: Callable[[], None] | None = None,
) -> int:
    """Run *app* with uvicorn per *settings*, on *sockets* if given (a worker); raises
    :class:`StartupError` (one line) when it cannot start. *on_started* runs once it
    serves (the CLI's banner: never before a start-up failure). Returns the exit code:
    0 after a graceful stop, 1 when a second Ctrl-C left tasks running."""
    import uvicorn

    from apcore_a2a import _logging
    from apcore_a2a.ops.exit_deadline import ExitDeadline
    from apcore_a2a.ops.graceful_server import GracefulServer

    # The drain's grace, then 3 s for open connections (streams, their last event).
    graceful = math.ceil(settings.shutdown_timeout) + 3
    # ...then the process is gone, whatever a module ignoring its cancel does, unless
    # shutdown_force_timeout is 0 (a host program calling serve() waits for it instead).
    deadline = (
        ExitDeadline(
            graceful + settings.shutdown_force_timeout,
            settings.shutdown_force_timeout,
            lambda: app.state.a2a.agent_executor.module_calls.snapshot(),
        )
        if settings.shutdown_force_timeout
        else None
    )

    _logging.configure(settings, force=False)
    watch = _StartupWatch(app)
    # uvicorn's own choice (httptools when installed, else h11), closing connections whose
    # request head is late (slowloris) and refusing one too large, as h11 does, on both;
    # the body's deadline is the app's (BodyDeadline).
    config = uvicorn.Config(
        watch,
        http=bounded_head_protocol(settings.header_timeout or 0),
        # A kept-alive connection waits header_timeout for its next request (the head timer
        # closes it on time), not uvicorn's 5 s: a client keeping connections 5 s (httpx's
        # default) met that close mid-send.
        timeout_keep_alive=math.ceil(settings.header_timeout or _NO_BOUND),
        h11_max_incomplete_event_size=HEAD_LIMIT,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=graceful,
        lifespan="on",
        access_log=False,
        log_config=None,
        # X-Forwarded-For names the caller quotas count by: trusted from configured proxies
        # only (uvicorn's default trusts any client on 127.0.0.1).
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=list(settings.forwarded_allow_ips) or None,
    )
    server = GracefulServer(config, app, settings, deadline, on_started, sockets is not None)
    errors: list[str] = []

    def startup_errors(record: logging.LogRecord) -> bool:
        # Not a logger of ours: its start-up error lines are kept for the StartupError.
        if record.levelno >= logging.ERROR and not server.started:
            errors.append(record.getMessage())
            return False
        return True

    logging.getLogger("uvicorn.error").addFilter(startup_errors)
    try:
        with graceful_exit(server), _stops_taken():
            server.run(sockets=sockets)
            if deadline is not None and deadline.abandoned():
                deadline.take_ctrl_c()  # it stays armed: the exit waits for a module's thread
            elif deadline is not None:
                deadline.disarm()
        if deadline is not None and deadline.abandoned() and sockets is not None:
            # A worker's main thread held them: the module's thread took one, and died of it.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
        return 1 if server.abandoned else 0
    except SystemExit as exc:  # uvicorn's exit on a failed start-up
        if watch.error is not None:
            raise StartupError(_describe(watch.error)) from None
        said = [m for m in errors if m != _UVICORN_FAILED]
        if said and "address already in use" in said[-1]:
            raise StartupError(f"{said[-1]}; {_PORT_HINT}") from None
        raise StartupError(said[-1] if said else f"start-up failed (exit {exc.code})") from None
    finally:
        logging.getLogger("uvicorn.error").removeFilter(startup_errors)


#: The signals that stop a server, and that the parent of workers forwards.
_STOPS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def _stops_taken() -> Iterator[None]:
    """Let SIGTERM and SIGINT in while the server runs, its handlers in place: a worker was
    forked with them held (``run``); then as they were."""
    if threading.current_thread() is not threading.main_thread() or sys.platform == "win32":
        yield  # (Windows has no signal masks, nor workers)
        return
    held = signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def store_hint(message: str) -> str:
    """What to do about a task store that failed with *message* (a clause to append)."""
    if "no schema has been selected" in message or "InvalidSchemaName" in message:
        found = re.search(r"[?&]schema=([^&\s)]+)", message)
        name = found.group(1) if found else "NAME"
        return (
            f"the schema {name!r} the URL names does not exist; create it "
            f"(CREATE SCHEMA {name};) or drop ?schema= from the URL"
        )
    folder = re.search(r"directory (.+?) does not exist", message)
    if folder:  # SQLite creates the database file, not its folder
        return f"create the folder first (mkdir -p {folder.group(1)}) or name another path"
    if "this agent's connections" in message:
        return "docs/deployment.md counts the connections an agent holds"
    if "Can't locate revision" in message or "unknown a2a-sdk schema revision" in message:
        return (
            "the database's schema revision is unknown to this version: it was written "
            "by a newer version of apcore-a2a (a2a-sdk); upgrade this one, or give it "
            "another database"
        )
    if _OLD_SCHEMA.search(message):
        return (
            "the database's tables are from an older version: run "
            "`apcore-a2a db upgrade` with the same --task-store first"
        )
    return "is the database running, and does --task-store (A2A_TASK_STORE) name it?"


def _describe(error: BaseException) -> str:
    from apcore_a2a.storage import StoreInUseError, StoreUnavailableError

    message = message_line(str(error)) or type(error).__name__
    if isinstance(error, StoreInUseError | OSError | ValueError):  # says what to do itself
        return message
    if isinstance(error, StoreUnavailableError):
        return f"{message}; {store_hint(message)}"
    return f"start-up failed: {type(error).__name__}: {message}"


class _StartupWatch:
    """Keeps a failed lifespan start-up's exception for one StartupError line, and drops
    the message (Starlette's whole traceback) uvicorn would log."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.error: BaseException | None = None

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


#: Exit status of a worker (and then of the group) that could not start (CLI: 3).
STARTUP_FAILED = 3


def run(
    factory: A2AServerFactory,
    on_started: Callable[[], None] | None = None,
    app: Starlette | None = None,
) -> int:
    """Serve with ``factory.settings.workers`` processes (one: this one, *app* if built);
    returns the exit code. The first worker runs *on_started* once it serves."""
    settings = factory.settings  # workers > 1 implies cluster mode (Settings checks it)
    if settings.workers == 1:
        return run_app(
            app if app is not None else factory.create()[0], settings, on_started=on_started
        )
    if threading.current_thread() is not threading.main_thread():  # before anything starts
        raise StartupError(
            f"workers={settings.workers} needs the main thread (the parent forwards SIGTERM and "
            "SIGINT to its workers; only the main thread takes signals): call serve() there"
        )
    from apcore_a2a.ops.ctrl_c import CtrlCs

    # Bound, not listening: it reserves the port (an error here names it) without taking
    # connections; the workers' listening sockets join it through SO_REUSEPORT.
    reservation = _bind(settings.host, settings.port)
    refusal = _connections_refusal(settings)
    if refusal is not None:  # one line for all workers, before any is forked
        reservation.close()
        print(f"Error: {refusal}", file=sys.stderr, flush=True)
        return STARTUP_FAILED
    context = multiprocessing.get_context("fork")
    children = [
        context.Process(
            target=_child,
            args=(factory, on_started if i == 0 else None, os.getpid()),
            name=f"apcore-a2a-worker-{i}",
        )
        for i in range(settings.workers)
    ]
    stopping = interrupted = False
    me, ctrl_cs = os.getpid(), CtrlCs()

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping, interrupted
        if os.getpid() != me:
            # A worker that runs this handler before _child's own (a signal taken just
            # before the fork): it has no children to forward to; it stops as _child would.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        # SIGTERM first: a Ctrl-C in a terminal reaches the workers too, and a SIGINT from
        # here would be their second. A SIGINT once stopping (a second one sent to this
        # process alone, as ``docker run`` without a terminal does, or one after SIGTERM)
        # ends their drain as it ends a single server's: uvicorn's rule.
        forward = signal.SIGINT if stopping and signum == signal.SIGINT else signal.SIGTERM
        if forward == signal.SIGINT and interrupted:
            # A third Ctrl-C: the workers leave it to us (they cannot count a terminal's
            # Ctrl-Cs, which reach them both directly and from here); they end at once.
            logger.error("Third Ctrl-C: killing the workers still running; exiting with 1")
            forward = signal.SIGKILL
        stopping, interrupted = True, interrupted or forward == signal.SIGINT
        for child in children:
            if child.pid is not None and child.is_alive():
                os.kill(child.pid, forward)

    previous = {sig: signal.signal(sig, ctrl_cs.judged(stop)) for sig in _STOPS}
    try:
        # Held while the workers are forked: a stop that comes meanwhile is forwarded once
        # every worker exists, and each worker holds it until its server takes it (run_app).
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            for child in children:
                child.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        with ctrl_cs.taking(stop):  # the forward of a Ctrl-C counted: not one more
            logger.info(
                "Serving A2A agent at %s with %d worker processes (%s)",
                settings.public_url(),
                len(children),
                ", ".join(str(c.pid) for c in children),
            )
            while not stopping:
                wait([c.sentinel for c in children], timeout=0.5)
                dead = [c for c in children if not c.is_alive()]
                if dead and not stopping:
                    said = "worker %s exited with %s; stopping the others"
                    logger.error(said, dead[0].pid, dead[0].exitcode)
                    stop(signal.SIGTERM, None)
            # then SIGKILL for those still running 2 s after their own ExitDeadline (none
            # with shutdown_force_timeout 0: each waits for its stubborn work, and so do we)
            deadline = time.monotonic() + math.ceil(settings.shutdown_timeout) + 5.0
            deadline += settings.shutdown_force_timeout
            forced = settings.shutdown_force_timeout > 0
            for child in children:
                child.join(max(0.0, deadline - time.monotonic()) if forced else None)
            for child in children:
                if child.is_alive():
                    logger.error("worker %s did not stop in time; killing it", child.pid)
                    child.kill()
                    child.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        reservation.close()
    codes = [c.exitcode for c in children]
    if STARTUP_FAILED in codes:
        return STARTUP_FAILED
    return 0 if all(code == 0 for code in codes) else 1


def _connections_refusal(settings: Settings) -> str | None:
    """Why the database cannot take the connections of all workers (PostgreSQL), or None."""
    from apcore_a2a.storage import StoreUnavailableError, open_stores

    if not settings.task_store.startswith("postgres"):
        return None

    async def check() -> None:
        async with contextlib.aclosing(open_stores(settings.task_store, settings)) as stores:
            await stores.check_connections()

    try:
        asyncio.run(check())
    except StoreUnavailableError as exc:
        return _describe(exc)
    return None


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _stop_with(parent: int) -> None:
    """Linux: have the kernel send this worker SIGTERM when *parent* dies. A parent killed
    with SIGKILL (the OOM killer, ``kill -9``) forwards nothing, and its workers would
    serve on beside the group a service manager starts next, on the same port."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the kernel was asked
        os.kill(os.getpid(), signal.SIGTERM)


def _child(factory: A2AServerFactory, on_started: Callable[[], None] | None, parent: int) -> None:
    # The parent's handlers forward signals; a worker stops the way a single server does.
    for sig in _STOPS:
        signal.signal(sig, signal.SIG_DFL)
    _stop_with(parent)
    settings = factory.settings
    listener = _bind(settings.host, settings.port)
    listener.listen(2048)
    app, _card = factory.create()
    try:
        code = run_app(app, settings, sockets=[listener], on_started=on_started)
    except StartupError as exc:
        # One line, as a single server says it; the parent then exits with this code.
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        sys.exit(STARTUP_FAILED)
    sys.exit(code)
