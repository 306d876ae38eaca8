"""``workers=N``: N server processes on one host sharing one listening socket.

The parent checks that the HTTP port is free, then forks N children; each child builds
its own agent from the same factory (so each has its own event loop, store connections
and gRPC server) and listens on the port with ``SO_REUSEPORT``, so the kernel spreads
incoming connections evenly over the workers (one shared accepting socket would let the
first idle process take nearly all of them). The children are replicas of one cluster
(a shared SQL store with ``cluster=True``): tasks, streams, cancels and approvals work
across workers exactly as across hosts. gRPC servers share their port the same way
(``SO_REUSEPORT`` is gRPC's default).

SIGTERM/SIGINT to the parent are passed to every child, which drains its running tasks
within ``shutdown_timeout``; the parent exits 0 when all of them did. A child that dies
on its own stops the others and the parent exits with a non-zero code (3 when a worker
could not start, as a single server): restarting is the service manager's job.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apcore_a2a.server.factory import A2AServerFactory

__all__ = ["run_workers"]

logger = logging.getLogger("apcore_a2a")

#: Exit status of a worker (and then of the group) that could not start (CLI: 3).
STARTUP_FAILED = 3
#: Seconds, beyond ``shutdown_timeout``, the parent waits for children before SIGKILL.
_KILL_MARGIN = 5.0


def run_workers(factory: A2AServerFactory) -> int:
    """Serve with ``factory.settings.workers`` processes; returns the exit code."""
    settings = factory.settings  # workers > 1 implies cluster mode (Settings checks it)
    # Bound, not listening: it reserves the port (an error here names it) without taking
    # connections; the workers' listening sockets join it through SO_REUSEPORT.
    reservation = _bind(settings.host, settings.port)
    context = multiprocessing.get_context("fork")
    children = [
        context.Process(target=_child, args=(factory,), name=f"apcore-a2a-worker-{i}")
        for i in range(settings.workers)
    ]
    stopping = False

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.pid is not None and child.is_alive():
                os.kill(child.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for child in children:
            child.start()
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
                logger.error(
                    "worker %s exited with %s; stopping the others", dead[0].pid, dead[0].exitcode
                )
                stop(signal.SIGTERM, None)
        deadline = time.monotonic() + settings.shutdown_timeout + _KILL_MARGIN
        for child in children:
            child.join(max(0.0, deadline - time.monotonic()))
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


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _child(factory: A2AServerFactory) -> None:
    # The parent's handlers forward signals; a worker stops the way a single server does.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    from apcore_a2a._runner import StartupError, run_app

    settings = factory.settings
    listener = _bind(settings.host, settings.port)
    listener.listen(2048)
    app, _card = factory.create()
    try:
        run_app(app, settings, sockets=[listener])
    except StartupError as exc:
        # One line, as a single server says it; the parent then exits with this code.
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        sys.exit(STARTUP_FAILED)
    sys.exit(0)
