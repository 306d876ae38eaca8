"""The client's shapes, both ways (pure functions): caller input (seed, 0.3 or 1.0 shape;
see :meth:`A2AClient.send_message`) → 1.0 JSON requests, which a2a-sdk's 0.3 transports
convert for 0.3 agents; SDK results as 1.0 JSON → the result shape of docs/client.md, with
absent optional members present as ``None``, ``[]`` or ``{}``.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from apcore_a2a.client.errors import InvalidAgentResponseError

MessageInput = str | bytes | Mapping[str, Any] | Sequence[Mapping[str, Any]]

_CONTENT_KEYS = ("text", "data", "raw", "url")


def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    return next((mapping[key] for key in keys if mapping.get(key) is not None), None)


def _b64(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, str):
        try:
            base64.b64decode(value, validate=True)
        except ValueError as exc:  # binascii.Error is one
            raise ValueError("file bytes must be bytes or a base64 string") from exc
        return value
    raise ValueError("file bytes must be bytes or a base64 string")


def normalize_part(part: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise ValueError(f"a part must be a mapping, got {type(part).__name__}")
    kind = part.get("type") or part.get("kind")
    file_obj = part.get("file")
    source: Mapping[str, Any] = file_obj if isinstance(file_obj, Mapping) else part
    if kind is None:
        present = [key for key in _CONTENT_KEYS if key in part]
        if len(present) != 1:
            raise ValueError(
                "a part needs exactly one of text, data, raw or url (or a 'type'), "
                f"got keys {sorted(part)}"
            )
        kind = "file" if present[0] in ("raw", "url") else present[0]
    out: dict[str, Any]
    if kind == "text":
        text = part.get("text")
        if not isinstance(text, str):
            raise ValueError("a text part needs a string 'text'")
        out = {"text": text}
    elif kind == "data":
        if "data" not in part:
            raise ValueError("a data part needs 'data'")
        out = {"data": part["data"]}
    elif kind == "file":
        raw = _first(source, "raw", "bytes")
        url = _first(source, "url", "uri")
        if (raw is None) == (url is None):
            raise ValueError("a file part needs exactly one of bytes/raw or uri/url")
        if raw is not None:
            out = {"raw": _b64(raw)}
        elif isinstance(url, str):
            out = {"url": url}
        else:
            raise ValueError("a file part's url must be a string")
    else:
        raise ValueError(f"unknown part type {kind!r} (expected text, data or file)")
    extras = {
        "mediaType": _first(source, "mediaType", "media_type", "mimeType", "mime_type"),
        "filename": _first(source, "filename", "name"),
    }
    out |= {key: str(value) for key, value in extras.items() if value}
    metadata = part.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise ValueError("part metadata must be a mapping")
        out["metadata"] = dict(metadata)
    return out


def _parts_of(message: MessageInput) -> tuple[list[dict[str, Any]], Mapping[str, Any]]:
    if isinstance(message, str):
        return [{"text": message}], {}
    if isinstance(message, bytes | bytearray):
        return [{"raw": _b64(message), "mediaType": "application/octet-stream"}], {}
    if isinstance(message, Mapping):
        if "parts" not in message:
            return [{"data": dict(message)}], {}
        parts = message["parts"]
        if isinstance(parts, str | bytes) or not isinstance(parts, Sequence):
            raise ValueError("message 'parts' must be a list of parts")
        return [normalize_part(p) for p in parts], message
    if isinstance(message, Sequence):
        return [normalize_part(p) for p in cast("Sequence[Any]", message)], {}
    raise TypeError(f"cannot send a {type(message).__name__} as a message")


def build_message(
    message: MessageInput,
    *,
    context_id: str | None = None,
    task_id: str | None = None,
    skill_id: str | None = None,
) -> dict[str, Any]:
    """Build a 1.0 JSON ``Message`` from caller input; explicit ids win over the message's."""
    parts, fields = _parts_of(message)
    role_in = str(fields.get("role") or "user")
    role = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}.get(role_in.lower().removeprefix("role_"))
    if role is None:
        raise ValueError(f"unknown message role {role_in!r} (expected 'user' or 'agent')")
    out: dict[str, Any] = {
        "messageId": str(_first(fields, "messageId", "message_id") or uuid.uuid4().hex),
        "role": role,
        "parts": parts,
    }
    ids = {
        "contextId": context_id or _first(fields, "contextId", "context_id"),
        "taskId": task_id or _first(fields, "taskId", "task_id"),
    }
    out |= {key: str(value) for key, value in ids.items() if value}
    metadata = fields.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError("message metadata must be a mapping")
    meta = dict(metadata or {}) | ({"skillId": skill_id} if skill_id else {})
    if meta:
        out["metadata"] = meta
    refs = _first(fields, "referenceTaskIds", "reference_task_ids")
    if refs:
        out["referenceTaskIds"] = [str(r) for r in refs]
    if fields.get("extensions"):
        out["extensions"] = [str(e) for e in fields["extensions"]]
    return out


def build_push_config(task_id: str, config: str | Mapping[str, Any]) -> dict[str, Any]:
    """A 1.0 ``TaskPushNotificationConfig`` (a 0.3 ``schemes`` list is accepted)."""
    cfg: Mapping[str, Any] = {"url": config} if isinstance(config, str) else config
    if not isinstance(cfg, Mapping):
        raise TypeError("a push config must be a URL string or a mapping")
    url = cfg.get("url")
    if not isinstance(url, str) or not url:
        raise ValueError("a push config needs a 'url'")
    out: dict[str, Any] = {"taskId": task_id, "url": url}
    out |= {key: str(cfg[key]) for key in ("id", "token") if cfg.get(key)}
    auth = cfg.get("authentication")
    if auth:
        if not isinstance(auth, Mapping):
            raise ValueError("push 'authentication' must be a mapping")
        schemes = auth.get("schemes")
        scheme = auth.get("scheme") or (schemes[0] if schemes else None)
        if not scheme:
            raise ValueError("push 'authentication' needs a 'scheme'")
        credentials = {"credentials": str(auth["credentials"])} if auth.get("credentials") else {}
        out["authentication"] = {"scheme": str(scheme)} | credentials
    return out


# -- results ----------------------------------------------------------------------------
FINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})


def _name(value: Any, prefix: str) -> str:
    name = str(value or "").removeprefix(prefix).lower().replace("_", "-")
    return "unknown" if name in ("", "unspecified") else name


def _ints(value: Any) -> Any:
    """Integral floats → int: protobuf carries every JSON number as a double (7 → 7.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = next((k for k in _CONTENT_KEYS if k in part), "text")
    value = _ints(part[kind]) if kind == "data" else part.get(kind, "")
    return {
        "type": "file" if kind in ("raw", "url") else kind,
        kind: value,
        "mediaType": part.get("mediaType") or None,
        "filename": part.get("filename") or None,
        "metadata": dict(part.get("metadata") or {}),
    }


def message(msg: Mapping[str, Any]) -> dict[str, Any]:
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


def task(t: Mapping[str, Any]) -> dict[str, Any]:
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


def event(obj: Mapping[str, Any], wire: Any = None) -> dict[str, Any] | None:
    """A ``StreamResponse`` / ``SendMessageResponse`` → client shape; ``None`` when empty.
    *wire* (the result as received) carries a 0.3 agent's ``final: true``."""
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


def push_config(obj: Mapping[str, Any], wire: Any = None) -> dict[str, Any]:
    """``status``/``statusReason``: an apcore-a2a agent's delivery report, only in *wire*."""
    wire = wire if isinstance(wire, Mapping) else {}
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
