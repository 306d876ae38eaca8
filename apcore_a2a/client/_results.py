"""a2a-sdk results (protobuf, whatever the wire version) → the client's one result shape.

The shape (docs/client.md) uses the 1.0 JSON member names, lowercase hyphenated states
(``"input-required"``) and roles (``"user"``), a ``kind`` on every top-level object
(``task``, ``message``, ``status-update``, ``artifact-update``) and a ``type`` on every
part (``text``, ``data``, ``file``). Absent optional members are present as ``None``,
``[]`` or ``{}`` so callers can index without guards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as Proto

from apcore_a2a.client.errors import InvalidAgentResponseError

__all__ = ["FINAL_STATES", "event", "is_final", "push_config", "task", "tasks"]

FINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})


def _json(value: Proto | Mapping[str, Any]) -> dict[str, Any]:
    return MessageToDict(value) if isinstance(value, Proto) else dict(value)


def _name(value: Any, prefix: str) -> str:
    name = str(value or "").removeprefix(prefix).lower().replace("_", "-")
    return "unknown" if name in ("", "unspecified") else name


def _ints(value: Any) -> Any:
    """Integral floats → int, recursively: protobuf carries every JSON number as a double,
    so ``7`` comes back as ``7.0``; restoring the int keeps results equal across agents."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = next((k for k in ("text", "data", "raw", "url") if k in part), "text")
    value = _ints(part[kind]) if kind == "data" else part.get(kind, "")
    return {
        "type": "file" if kind in ("raw", "url") else kind,
        kind: value,
        "mediaType": part.get("mediaType") or None,
        "filename": part.get("filename") or None,
        "metadata": dict(part.get("metadata") or {}),
    }


def message(raw: Proto | Mapping[str, Any]) -> dict[str, Any]:
    msg = _json(raw)
    return {
        "kind": "message",
        "messageId": msg.get("messageId"),
        "role": _name(msg.get("role"), "ROLE_"),
        "parts": [_part(p) for p in msg.get("parts") or []],
        "contextId": msg.get("contextId") or None,
        "taskId": msg.get("taskId") or None,
        "metadata": dict(msg.get("metadata") or {}),
        "referenceTaskIds": list(msg.get("referenceTaskIds") or []),
        "extensions": list(msg.get("extensions") or []),
    }


def _status(status: Mapping[str, Any] | None) -> dict[str, Any]:
    status = status or {}
    return {
        "state": _name(status.get("state"), "TASK_STATE_"),
        "message": message(status["message"]) if status.get("message") else None,
        "timestamp": status.get("timestamp") or None,
    }


def _artifact(art: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "artifactId": art.get("artifactId"),
        "name": art.get("name") or None,
        "description": art.get("description") or None,
        "parts": [_part(p) for p in art.get("parts") or []],
        "metadata": dict(art.get("metadata") or {}),
        "extensions": list(art.get("extensions") or []),
    }


def task(raw: Proto | Mapping[str, Any]) -> dict[str, Any]:
    """A ``Task`` → client shape."""
    t = _json(raw)
    if not t.get("id"):
        raise InvalidAgentResponseError(f"agent returned a task without an id: {t!r:.200}")
    return {
        "kind": "task",
        "id": t.get("id"),
        "contextId": t.get("contextId") or None,
        "status": _status(t.get("status")),
        "artifacts": [_artifact(a) for a in t.get("artifacts") or []],
        "history": [message(m) for m in t.get("history") or []],
        "metadata": dict(t.get("metadata") or {}),
    }


def _update(ev: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "taskId": ev.get("taskId"),
        "contextId": ev.get("contextId") or None,
        "metadata": dict(ev.get("metadata") or {}),
    }


def event(raw: Proto | Mapping[str, Any], wire: Any = None) -> dict[str, Any] | None:
    """A ``StreamResponse`` / ``SendMessageResponse`` → client shape; ``None`` when empty.

    *wire* is the result as received: a 0.3 agent's ``final: true`` is honoured (JSON-RPC
    result or REST event).
    """
    obj = _json(raw)
    if "task" in obj:
        return task(obj["task"])
    if "message" in obj:
        return message(obj["message"])
    if "statusUpdate" in obj:
        ev, status = obj["statusUpdate"], _status(obj["statusUpdate"].get("status"))
        sent = wire.get("statusUpdate", wire) if isinstance(wire, Mapping) else None
        sent_final = isinstance(sent, Mapping) and sent.get("final") is True
        final = status["state"] in FINAL_STATES | INTERRUPTED_STATES or sent_final
        return {"kind": "status-update", **_update(ev), "status": status, "final": final}
    if "artifactUpdate" in obj:
        ev = obj["artifactUpdate"]
        return {
            "kind": "artifact-update",
            **_update(ev),
            "artifact": _artifact(ev.get("artifact") or {}),
            "append": bool(ev.get("append")),
            "lastChunk": bool(ev.get("lastChunk")),
        }
    return None


def is_final(ev: Mapping[str, Any]) -> bool:
    """True when no further events follow for this request (the stream may end)."""
    if ev["kind"] == "task":
        return ev["status"]["state"] in FINAL_STATES
    return ev["kind"] == "message" or bool(ev.get("final"))


def tasks(raw: Proto | Mapping[str, Any]) -> dict[str, Any]:
    """A ``ListTasksResponse`` → ``{"tasks", "nextCursor", "totalSize"}``."""
    obj = _json(raw)
    return {
        "tasks": [task(t) for t in obj.get("tasks") or []],
        "nextCursor": obj.get("nextPageToken") or None,
        "totalSize": obj.get("totalSize"),
    }


def push_config(raw: Proto | Mapping[str, Any], wire: Any = None) -> dict[str, Any]:
    """A ``TaskPushNotificationConfig`` → ``{id, taskId, url, token, authentication,
    status, statusReason}``; the last two are what an apcore-a2a agent reports about
    deliveries (read from *wire*, the config as received), ``None`` from other agents."""
    obj, wire = _json(raw), wire if isinstance(wire, Mapping) else {}
    auth = obj.get("authentication")
    return {
        "id": obj.get("id") or None,
        "taskId": obj.get("taskId") or None,
        "url": obj.get("url"),
        "token": obj.get("token") or None,
        "authentication": {"scheme": auth.get("scheme"), "credentials": auth.get("credentials")}
        if auth
        else None,
        "status": wire.get("status") if isinstance(wire.get("status"), str) else None,
        "statusReason": wire.get("statusReason") or None,
    }
