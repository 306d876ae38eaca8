"""A2A wire results (1.0 or 0.3) → the client's one documented result shape.

The shape (documented in docs/client.md) uses the 1.0 JSON member names, lowercase
hyphenated states (``"input-required"``) and roles (``"user"``), a ``kind`` on every
top-level object (``task``, ``message``, ``status-update``, ``artifact-update``) and a
``type`` on every part (``text``, ``data``, ``file``). Absent optional members are
present as ``None``, ``[]`` or ``{}`` so callers can index without guards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apcore_a2a.client.errors import InvalidAgentResponseError

__all__ = [
    "FINAL_STATES",
    "INTERRUPTED_STATES",
    "decode_event",
    "decode_list",
    "decode_message",
    "decode_push_config",
    "decode_push_configs",
    "decode_send_result",
    "decode_task",
    "is_final",
    "state_name",
]

FINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})


def _bad(what: str, value: Any) -> InvalidAgentResponseError:
    return InvalidAgentResponseError(f"agent returned an invalid {what}: {str(value)[:200]}")


def _obj(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(what, value)
    return value


def state_name(state: Any) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` (1.0) or ``input-required`` (0.3) → ``input-required``."""
    name = str(state or "").removeprefix("TASK_STATE_").lower().replace("_", "-")
    return "unknown" if name in ("", "unspecified") else name


def _role(role: Any) -> str:
    return str(role or "").removeprefix("ROLE_").lower() or "unknown"


def _ints(value: Any) -> Any:
    """Integral floats → int, recursively.

    Protobuf carries every JSON number as a double, so 1.0 agents send ``7`` back as
    ``7.0``; restoring the int keeps results equal whatever the agent's wire version.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _part(raw: Any) -> dict[str, Any]:
    part = _obj(raw, "part")
    meta = dict(part.get("metadata") or {})
    out: dict[str, Any]
    kind = part.get("kind")
    if kind == "file" or isinstance(part.get("file"), Mapping):
        file = _obj(part.get("file"), "file part")
        out = {"type": "file"}
        if file.get("bytes") is not None:
            out["raw"] = file["bytes"]
        else:
            out["url"] = file.get("uri")
        media_type, filename = file.get("mimeType"), file.get("name")
    else:
        media_type, filename = part.get("mediaType"), part.get("filename")
        if "text" in part:
            out = {"type": "text", "text": part["text"]}
        elif "data" in part:
            data = part["data"]
            if meta.pop("data_part_compat", False) and isinstance(data, Mapping):
                data = data.get("value")
            out = {"type": "data", "data": _ints(data)}
        elif "raw" in part:
            out = {"type": "file", "raw": part["raw"]}
        elif "url" in part:
            out = {"type": "file", "url": part["url"]}
        else:
            raise _bad("part", raw)
    out["mediaType"] = media_type or None
    out["filename"] = filename or None
    out["metadata"] = meta
    return out


def decode_message(raw: Any) -> dict[str, Any]:
    """A 1.0 or 0.3 ``Message`` → client shape."""
    msg = _obj(raw, "message")
    return {
        "kind": "message",
        "messageId": msg.get("messageId"),
        "role": _role(msg.get("role")),
        "parts": [_part(p) for p in msg.get("parts") or []],
        "contextId": msg.get("contextId") or None,
        "taskId": msg.get("taskId") or None,
        "metadata": dict(msg.get("metadata") or {}),
        "referenceTaskIds": list(msg.get("referenceTaskIds") or []),
        "extensions": list(msg.get("extensions") or []),
    }


def _status(raw: Any) -> dict[str, Any]:
    status = _obj(raw or {}, "task status")
    message = status.get("message")
    return {
        "state": state_name(status.get("state")),
        "message": decode_message(message) if message else None,
        "timestamp": status.get("timestamp") or None,
    }


def _artifact(raw: Any) -> dict[str, Any]:
    art = _obj(raw, "artifact")
    return {
        "artifactId": art.get("artifactId"),
        "name": art.get("name") or None,
        "description": art.get("description") or None,
        "parts": [_part(p) for p in art.get("parts") or []],
        "metadata": dict(art.get("metadata") or {}),
        "extensions": list(art.get("extensions") or []),
    }


def decode_task(raw: Any) -> dict[str, Any]:
    """A 1.0 or 0.3 ``Task`` → client shape."""
    task = _obj(raw, "task")
    if not isinstance(task.get("id"), str):
        raise _bad("task", raw)
    return {
        "kind": "task",
        "id": task["id"],
        "contextId": task.get("contextId") or None,
        "status": _status(task.get("status")),
        "artifacts": [_artifact(a) for a in task.get("artifacts") or []],
        "history": [decode_message(m) for m in task.get("history") or []],
        "metadata": dict(task.get("metadata") or {}),
    }


def _status_update(ev: Mapping[str, Any]) -> dict[str, Any]:
    status = _status(ev.get("status"))
    state = status["state"]
    final = state in FINAL_STATES or state in INTERRUPTED_STATES or ev.get("final") is True
    return {
        "kind": "status-update",
        "taskId": ev.get("taskId"),
        "contextId": ev.get("contextId") or None,
        "status": status,
        "final": final,
        "metadata": dict(ev.get("metadata") or {}),
    }


def _artifact_update(ev: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "artifact-update",
        "taskId": ev.get("taskId"),
        "contextId": ev.get("contextId") or None,
        "artifact": _artifact(ev.get("artifact")),
        "append": bool(ev.get("append")),
        "lastChunk": bool(ev.get("lastChunk")),
        "metadata": dict(ev.get("metadata") or {}),
    }


def _kind_v03(obj: Mapping[str, Any]) -> str | None:
    kind = obj.get("kind")
    if isinstance(kind, str):
        return kind
    # Some 0.3 servers omit ``kind``; guess from the members like the SDK does.
    if "taskId" in obj and "final" in obj:
        return "status-update"
    if "taskId" in obj and "artifact" in obj:
        return "artifact-update"
    if "messageId" in obj:
        return "message"
    if "id" in obj:
        return "task"
    return None


def decode_event(raw: Any, version: str) -> dict[str, Any] | None:
    """One stream result → client event shape; ``None`` for events we do not know."""
    obj = _obj(raw, "stream event")
    if version == "1.0":
        if "task" in obj:
            return decode_task(obj["task"])
        if "message" in obj:
            return decode_message(obj["message"])
        if "statusUpdate" in obj:
            return _status_update(_obj(obj["statusUpdate"], "status update"))
        if "artifactUpdate" in obj:
            return _artifact_update(_obj(obj["artifactUpdate"], "artifact update"))
        return None
    kind = _kind_v03(obj)
    if kind == "task":
        return decode_task(obj)
    if kind == "message":
        return decode_message(obj)
    if kind == "status-update":
        return _status_update(obj)
    if kind == "artifact-update":
        return _artifact_update(obj)
    return None


def decode_send_result(raw: Any, version: str) -> dict[str, Any]:
    """A SendMessage result (a Task or a Message) → client shape."""
    event = decode_event(raw, version)
    if event is None or event["kind"] not in ("task", "message"):
        raise _bad("send result", raw)
    return event


def is_final(event: Mapping[str, Any]) -> bool:
    """True when no further events follow for this request (the stream may end)."""
    kind = event.get("kind")
    if kind == "message":
        return True
    if kind == "task":
        return event["status"]["state"] in FINAL_STATES
    if kind == "status-update":
        return bool(event.get("final"))
    return False


def decode_list(raw: Any) -> dict[str, Any]:
    """A 1.0 ``ListTasksResponse`` → ``{"tasks", "nextCursor", "totalSize"}``."""
    obj = _obj(raw, "task list")
    tasks = obj.get("tasks") or []
    if not isinstance(tasks, list):
        raise _bad("task list", raw)
    total = obj.get("totalSize")
    return {
        "tasks": [decode_task(t) for t in tasks],
        "nextCursor": obj.get("nextPageToken") or None,
        "totalSize": total if isinstance(total, int) else None,
    }


def decode_push_config(raw: Any) -> dict[str, Any]:
    """A 1.0 (flat) or 0.3 (nested) push config →
    ``{id, taskId, url, token, authentication, status, statusReason}``.

    ``status`` (``"active"`` / ``"failed"``) and ``statusReason`` are what an apcore-a2a
    agent reports about deliveries to the config; ``None`` from agents that do not.
    """
    obj = _obj(raw, "push config")
    inner = obj.get("pushNotificationConfig")
    src = _obj(inner, "push config") if inner is not None else obj
    auth_in = src.get("authentication")
    auth = None
    if isinstance(auth_in, Mapping):
        schemes = auth_in.get("schemes")
        scheme = auth_in.get("scheme") or (schemes[0] if schemes else None)
        auth = {"scheme": scheme, "credentials": auth_in.get("credentials") or None}
    return {
        "id": src.get("id") or None,
        "taskId": obj.get("taskId") or None,
        "url": src.get("url"),
        "token": src.get("token") or None,
        "authentication": auth,
        "status": _text_or_none(obj.get("status")),
        "statusReason": _text_or_none(obj.get("statusReason")),
    }


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def decode_push_configs(raw: Any) -> list[dict[str, Any]]:
    """1.0 ``{"configs": [...]}`` or 0.3 ``[...]`` → list of push configs."""
    items = raw.get("configs") if isinstance(raw, Mapping) else raw
    if items is None:
        return []
    if not isinstance(items, list):
        raise _bad("push config list", raw)
    return [decode_push_config(c) for c in items]
