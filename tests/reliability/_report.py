"""Counting what the reliability suite did, for the nox session's summary table.

Tests add their figures to one :class:`Tally` per section. When the environment names a
report file (``A2A_RELIABILITY_REPORT``), every tally is appended to it as one JSON line
at the end of the session; ``python -m tests.reliability.summary`` turns those lines and
pytest's JUnit XML into the table in ``docs/reliability.md``.

``A2A_RELIABILITY_SCALE`` multiplies the generated-case budgets (1 in CI); the nox
session raises it. ``A2A_RELIABILITY_FULL=1`` enables the parts that only the nox session
runs (PostgreSQL restart, soak).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCALE = float(os.environ.get("A2A_RELIABILITY_SCALE", "1") or "1")
FULL = os.environ.get("A2A_RELIABILITY_FULL", "") == "1"
REPORT = os.environ.get("A2A_RELIABILITY_REPORT", "")


def examples(base: int) -> int:
    """The ``max_examples`` for a property whose CI budget is *base*."""
    return max(1, round(base * SCALE))


@dataclass
class Tally:
    section: str
    cases: int = 0
    violations: int = 0
    five_xx: int = 0
    leaked_tasks: int | None = None
    leaked_fds: int | None = None
    lost_tasks: int | None = None
    rss_start_kib: int | None = None
    rss_end_kib: int | None = None
    notes: list[str] = field(default_factory=list)


_lock = threading.Lock()
_tallies: dict[str, Tally] = {}


def tally(section: str) -> Tally:
    with _lock:
        return _tallies.setdefault(section, Tally(section))


def flush() -> None:
    """Append every tally to the report file, if one was asked for."""
    if not REPORT:
        return
    with _lock:
        rows = [asdict(t) for t in _tallies.values()]
        _tallies.clear()
    with Path(REPORT).open("a", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
