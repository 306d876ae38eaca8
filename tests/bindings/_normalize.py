"""Turn protocol results into plain data that can be compared across bindings.

Generated ids are replaced by placeholders numbered in order of first appearance, so two
results compare equal when they have the same shape *and* the same references between
their parts (an event's ``taskId`` is the task's ``id``); timestamps are dropped.
Errors become ``{"error": <class name>, "message": <text>}``.

The a2a-sdk 1.3 *0.3 REST client* cannot read the error envelope the SDK's 0.3 REST routes
send (it expects ``{"type", "message"}``, the routes send the google.rpc ``{"error":
{"message", "details": [ErrorInfo]}}`` form) and raises a generic HTTP error instead. For
such errors the server's own answer is read from the HTTP response the client wraps, so
what is compared is what the server said, not the client's fallback.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from a2a.utils.errors import A2A_REASON_TO_ERROR
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as ProtoMessage

# "key" is the per-run gate key of the test agent's demo.gate skill.
ID_KEYS = frozenset({"id", "taskId", "contextId", "messageId", "artifactId", "key"})
DROPPED_KEYS = frozenset({"timestamp"})


class Ids:
    """Maps each distinct generated id to ``<id1>``, ``<id2>``, ... in order of appearance."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if value not in self._seen:
            self._seen[value] = f"<id{len(self._seen) + 1}>"
        return self._seen[value]


def error(exc: BaseException) -> dict[str, str]:
    if isinstance(exc, NotImplementedError):
        # Raised by the SDK client itself (the call never leaves it); its text only names
        # the transport class.
        return {"error": "NotImplementedError", "message": "refused by the client"}
    served = _served_error(exc.__cause__)
    return served or {"error": type(exc).__name__, "message": str(exc)}


def _served_error(cause: BaseException | None) -> dict[str, str] | None:
    """The A2A error in a google.rpc-style HTTP error body, if *cause* carries one."""
    if not isinstance(cause, httpx.HTTPStatusError):
        return None
    try:
        body = json.loads(cause.response.content)
    except (ValueError, httpx.ResponseNotRead):
        return None
    envelope = body.get("error") if isinstance(body, dict) else None
    if not isinstance(envelope, dict):
        return None
    for detail in envelope.get("details") or ():
        reason = detail.get("reason") if isinstance(detail, dict) else None
        if reason in A2A_REASON_TO_ERROR:
            return {"error": A2A_REASON_TO_ERROR[reason].__name__, "message": envelope["message"]}
    return None


def normalize(value: Any, ids: Ids | None = None) -> Any:
    """Plain, comparable data for a proto message, a list of them, a dict or an error."""
    ids = ids or Ids()
    if isinstance(value, BaseException):
        return error(value)
    if isinstance(value, ProtoMessage):
        return _walk(MessageToDict(value), ids)
    if isinstance(value, dict):
        return {k: normalize(v, ids) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v, ids) for v in value]
    return value


def _walk(node: Any, ids: Ids) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, child in node.items():
            if key in DROPPED_KEYS:
                continue
            if key in ID_KEYS and isinstance(child, str):
                out[key] = ids(child)
            elif key == "referenceTaskIds" and isinstance(child, list):
                out[key] = [ids(c) for c in child]
            else:
                out[key] = _walk(child, ids)
        return out
    if isinstance(node, list):
        return [_walk(c, ids) for c in node]
    return node


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"task.status.state": "...", "events[0].task.id": "<id1>", ...}``; empty containers
    are kept as leaves so a missing list and an empty one still differ."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, child in value.items():
            out.update(flatten(child, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, child in enumerate(value):
            out.update(flatten(child, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def differences(expected: Any, actual: Any) -> list[str]:
    """Field-by-field differences between two normalized results (empty when equal)."""
    left, right = flatten(expected), flatten(actual)
    lines = []
    for path in sorted(left.keys() | right.keys()):
        a, b = left.get(path, "<missing>"), right.get(path, "<missing>")
        if a != b:
            lines.append(f"{path}: {a!r} != {b!r}")
    return lines
