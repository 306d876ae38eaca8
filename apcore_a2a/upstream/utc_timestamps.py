"""The client reads a task status ``timestamp`` without a zone designator as UTC.

A2A 1.0.1 §5.6.1: timestamps are ISO 8601 "in UTC timezone" ("all times are UTC"). a2a-sdk
1.3's client transports parse them with protobuf's ``Timestamp.FromJsonString``, which
refuses one without ``Z`` or an offset, so a whole answer fails ("Failed to parse timestamp
field"): pydantic fasta2a 2.1.1 writes ``datetime.now().isoformat()``
(``2026-12-02T00:45:27.232760``) in every task it answers with. :func:`utc_timestamps`
gives such a timestamp its ``Z`` before the SDK parses the answer; anything else
(offsets, other strings) is left for the SDK to judge. Only task statuses are read: a
part's ``data`` and any ``metadata`` are the application's, never touched.

The client imports this module alone (nothing of the server side). Deletable the day
``tests/upstream/test_utc_timestamps.py`` fails: the SDK then parses such answers itself.
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


def utc_timestamps(answer: Any, text: bytes | str | None = None) -> Any:
    """*answer* (a JSON-RPC reply, a result or a REST body) with every zone-less task status
    timestamp marked UTC; *answer* itself (not a copy) when there is none. *text*, the JSON
    *answer* was parsed from, spares the walk when it holds no such timestamp."""
    if not isinstance(answer, dict):
        return answer
    # Searched as given: encoding a large SSE event only to search it would copy it.
    if isinstance(text, str) and not _IN_TEXT.search(text):
        return answer
    if isinstance(text, bytes) and not _IN_BYTES.search(text):
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
