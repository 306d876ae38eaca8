"""A graceful stop of ``serve()`` exits with status 0, not with the signal uvicorn hands back."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def graceful_exit() -> Iterator[None]:
    """Let a signal that stopped uvicorn gracefully end in exit status 0."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # A handler with nothing left to do: uvicorn already stopped on the signal.
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, lambda sig, frame: None) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
