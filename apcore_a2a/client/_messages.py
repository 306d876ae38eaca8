"""Caller input → A2A wire requests (pure functions, no I/O).

Callers may describe a message loosely: a ``str`` (one text part), ``bytes`` (one file
part), a mapping without ``parts`` (one data part), a list of parts, or a full message
mapping in the seed shape (``{"type": "text", ...}`` parts), the 0.3 shape (``kind``
parts, ``file`` objects) or the 1.0 shape (``text``/``data``/``raw``/``url`` parts).
Everything is normalised to 1.0 JSON; a2a-sdk's 0.3 transport converts it for 0.3 agents.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

__all__ = [
    "MessageInput",
    "build_message",
    "build_push_config",
    "normalize_part",
]

MessageInput = str | bytes | Mapping[str, Any] | Sequence[Mapping[str, Any]]

_ROLES = {
    "user": "ROLE_USER",
    "role_user": "ROLE_USER",
    "agent": "ROLE_AGENT",
    "role_agent": "ROLE_AGENT",
}
_CONTENT_KEYS = ("text", "data", "raw", "url")


def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = mapping.get(key)
        if value is not None:
            return value
    return None


def _b64(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, str):
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("file bytes must be bytes or a base64 string") from exc
        return value
    raise ValueError("file bytes must be bytes or a base64 string")


def normalize_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """Return one part as 1.0 JSON (``text`` | ``data`` | ``raw`` | ``url`` + extras)."""
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
    media_type = _first(source, "mediaType", "media_type", "mimeType", "mime_type")
    filename = _first(source, "filename", "name")
    if media_type:
        out["mediaType"] = str(media_type)
    if filename:
        out["filename"] = str(filename)
    metadata = part.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise ValueError("part metadata must be a mapping")
        out["metadata"] = dict(metadata)
    return out


def _parts_of(message: MessageInput) -> tuple[list[dict[str, Any]], Mapping[str, Any]]:
    """Split caller input into (1.0 parts, message-level fields)."""
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
    role = _ROLES.get(role_in.lower())
    if role is None:
        raise ValueError(f"unknown message role {role_in!r} (expected 'user' or 'agent')")
    out: dict[str, Any] = {
        "messageId": str(_first(fields, "messageId", "message_id") or uuid.uuid4().hex),
        "role": role,
        "parts": parts,
    }
    ctx = context_id or _first(fields, "contextId", "context_id")
    tid = task_id or _first(fields, "taskId", "task_id")
    if ctx:
        out["contextId"] = str(ctx)
    if tid:
        out["taskId"] = str(tid)
    metadata = fields.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError("message metadata must be a mapping")
    meta = dict(metadata or {})
    if skill_id:
        meta["skillId"] = skill_id
    if meta:
        out["metadata"] = meta
    refs = _first(fields, "referenceTaskIds", "reference_task_ids")
    if refs:
        out["referenceTaskIds"] = [str(r) for r in refs]
    if fields.get("extensions"):
        out["extensions"] = [str(e) for e in fields["extensions"]]
    return out


def build_push_config(task_id: str, config: str | Mapping[str, Any]) -> dict[str, Any]:
    """Build a 1.0 ``TaskPushNotificationConfig`` from a URL or a config mapping.

    The mapping takes ``url`` and optionally ``id``, ``token`` and ``authentication``
    (``{"scheme": "Bearer", "credentials": "..."}``; a 0.3 ``schemes`` list is accepted).
    """
    cfg: Mapping[str, Any] = {"url": config} if isinstance(config, str) else config
    if not isinstance(cfg, Mapping):
        raise TypeError("a push config must be a URL string or a mapping")
    url = cfg.get("url")
    if not isinstance(url, str) or not url:
        raise ValueError("a push config needs a 'url'")
    out: dict[str, Any] = {"taskId": task_id, "url": url}
    if cfg.get("id"):
        out["id"] = str(cfg["id"])
    if cfg.get("token"):
        out["token"] = str(cfg["token"])
    auth = cfg.get("authentication")
    if auth:
        if not isinstance(auth, Mapping):
            raise ValueError("push 'authentication' must be a mapping")
        schemes = auth.get("schemes")
        scheme = auth.get("scheme") or (schemes[0] if schemes else None)
        if not scheme:
            raise ValueError("push 'authentication' needs a 'scheme'")
        out["authentication"] = {"scheme": str(scheme)}
        if auth.get("credentials"):
            out["authentication"]["credentials"] = str(auth["credentials"])
    return out
