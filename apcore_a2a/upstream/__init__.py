"""The seam: each module corrects a2a-sdk, Starlette, uvicorn, aiosqlite or apcore for our
agent only. ``README.md`` here is the table of corrections: what, why, and the tripwire test.
"""

from __future__ import annotations

import logging
import threading


class WhileOurs:
    """A filter on a foundation's *loggers* while an agent (or server) of ours runs: on
    with the first :meth:`attach`, off with the last :meth:`detach` (counted under a lock,
    as agents start and stop on any thread). The corrections of what those libraries log
    share it."""

    def __init__(self, record_filter: logging.Filter, *loggers: str) -> None:
        self._filter, self._loggers = record_filter, loggers
        self._lock = threading.Lock()
        self._running = 0

    def attach(self) -> None:
        with self._lock:
            self._running += 1
            if self._running == 1:
                for name in self._loggers:
                    logging.getLogger(name).addFilter(self._filter)

    def detach(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                for name in self._loggers:
                    logging.getLogger(name).removeFilter(self._filter)
