"""The client reads a task status ``timestamp`` without a zone designator as UTC (§5.6.1).

Only task statuses are read, never a part's ``data`` or ``metadata``. The client imports
this module alone (nothing of the server side).
"""

from __future__ import annotations

import re
from typing import Any

#: a date and time of day with no zone designator (RFC 3339 without the offset)
_NO_ZONE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?")
#: such a timestamp in an answer's JSON text: without one, the answer is not walked at all
_IN_TEXT = re.compile(r'"timestamp"\s*:\s*"' + _NO_ZONE.pattern + '"')
_IN_BYTES = re.compile(_IN_TEXT.pattern.encode())
#: where a task, a status update or a list of tasks sits in an answer (1.0 and 0.3 shapes)
_WRAPPERS = ("task", "statusUpdate", "status_update", "result")


def utc_timestamps(answer: Any, text: bytes | bytearray | str | None = None) -> Any:
    """*answer* (a JSON-RPC reply, a result or a REST body) with every zone-less task status
    timestamp marked UTC; *answer* itself (not a copy) when there is none. *text*, the JSON
    *answer* was parsed from, spares the walk when it holds no such timestamp."""
    if not isinstance(answer, dict):
        return answer
    # Searched as given: encoding a large SSE event only to search it would copy it.
    if isinstance(text, str) and not _IN_TEXT.search(text):
        return answer
    if isinstance(text, bytes | bytearray) and not _IN_BYTES.search(text):
        return answer
    fixed = dict(answer)
    status = answer.get("status")
    stamp = status.get("timestamp") if isinstance(status, dict) else None
    if isinstance(stamp, str) and _NO_ZONE.fullmatch(stamp):
        fixed["status"] = {**status, "timestamp": stamp + "Z"}  # type: ignore[dict-item]
    for key in _WRAPPERS:
        if key in answer:
            fixed[key] = utc_timestamps(answer[key])
    if isinstance(answer.get("tasks"), list):
        tasks = [utc_timestamps(task) for task in answer["tasks"]]
        if any(new is not old for new, old in zip(tasks, answer["tasks"], strict=True)):
            fixed["tasks"] = tasks
    changed = any(fixed[key] is not answer[key] for key in answer)
    return fixed if changed else answer
