"""A graceful stop of ``serve()`` exits with status 0, not with the signal uvicorn hands back."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

import uvicorn


@contextlib.contextmanager
def graceful_exit(server: uvicorn.Server) -> Iterator[None]:
    """Let a signal that stopped *server* gracefully end in exit status 0.

    Until uvicorn installs its own handlers (``Server.run`` first builds its event loop), a
    SIGTERM or SIGINT is handed to *server*, which then stops as soon as it has started: a
    worker whose parent dies then (the kernel's parent-death signal) would serve on for ever
    if this handler dropped it. After uvicorn's stop, the signal it hands back has nothing
    left to do. A handler set meanwhile by another (``ExitDeadline.take_ctrl_c``) stays."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) == server.handle_exit:
                signal.signal(sig, handler)
