"""A graceful stop of ``serve()`` exits with status 0 (uvicorn ends it with the signal).

uvicorn hands the signal it stopped on back to the process's own handler once it has shut
down gracefully (``Server.capture_signals``): the default SIGTERM handler then ends the
process with -15 and SIGINT raises ``KeyboardInterrupt``, so a clean stop looks like a
crash to service managers and containers. :func:`graceful_exit` installs, for the length
of the run, a handler with nothing left to do. ``tests/upstream/test_uvicorn_signals.py``
fails when uvicorn stops handing the signal back; then this file can go.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def graceful_exit() -> Iterator[None]:
    """Let a signal that stopped uvicorn gracefully end in exit status 0."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _stopped) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stopped(sig: int, frame: Any) -> None:
    """Handler of a stop signal uvicorn already acted on (see :func:`graceful_exit`)."""
