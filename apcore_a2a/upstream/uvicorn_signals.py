"""A graceful stop of ``serve()`` exits with status 0, not with the signal uvicorn hands back."""

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
