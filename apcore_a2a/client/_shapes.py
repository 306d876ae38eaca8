"""The client's shapes, both ways (pure functions), and what ``A2AClient`` refuses of its
arguments before any request, with ``ValueError``: an agent URL that is no absolute http(s)
URL, a header value httpx could not send, an empty id, a timeout that is not positive, a
negative retry count.

What a caller passes (seed, 0.3 or 1.0 names) is brought to 1.0 JSON names and parsed into
the SDK's protobuf request, which checks every value (the 0.3 transports convert it for 0.3
agents); a protobuf result becomes the shape of docs/client.md by one walk (:func:`plain`).
"""

from __future__ import annotations

import base64
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import unquote, urlsplit

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.message import Message as Proto

from apcore_a2a.client.card import CARD_PATHS
from apcore_a2a.client.errors import InvalidAgentResponseError

MessageInput = str | bytes | Mapping[str, Any] | Sequence[Mapping[str, Any]]
P = TypeVar("P", bound=Proto)

#: a part's content members; a part has exactly one (the proto's ``content`` oneof)
_CONTENT = {"text": ("text",), "data": ("data",), "file": ("raw", "url")}
#: 0.3 and seed names of a part's members -> 1.0 names
_PART_ALIASES = {"bytes": "raw", "uri": "url", "mimeType": "mediaType", "name": "filename"}


def _camel(fields: Mapping[str, Any]) -> dict[str, Any]:
    """*fields* with snake_case keys in camelCase, so a key is found under one name only."""
    return {re.sub(r"_([a-z])", lambda m: m[1].upper(), str(k)): v for k, v in fields.items()}


def _parsed(fields: Mapping[str, Any], into: P) -> P:
    try:
        parsed: P = ParseDict(fields, into, ignore_unknown_fields=True)
    except ParseError as exc:
        raise ValueError(str(exc)) from None
    return parsed


def _json_numbers(value: Any, where: str) -> None:
    """Refuse NaN and ±Infinity anywhere in *value*: JSON has no such number, and protobuf
    takes one into a ``Value`` but fails writing the request (mid-call, as no ValueError)."""
    pending = [value]
    while pending:  # no recursion: a deep value is the caller's, not a RecursionError
        item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{where} holds {item}, which is no JSON number")
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)


def _part(part: Any) -> dict[str, Any]:
    """One part in 1.0 JSON names (a 0.3 ``file`` object flattened into it)."""
    if not isinstance(part, Mapping):
        raise ValueError(f"a part must be a mapping, got {type(part).__name__}")
    kind = part.get("type") or part.get("kind")
    if kind is not None and kind not in _CONTENT:
        raise ValueError(f"unknown part type {kind!r} (expected text, data or file)")
    fields = _camel(part)
    if isinstance(fields.get("file"), Mapping):
        fields |= _camel(fields["file"])
    out = {
        _PART_ALIASES.get(key, key): value
        for key, value in fields.items()
        if key not in ("type", "kind", "file") and (value is not None or key == "data")
    }
    expected = _CONTENT[kind] if kind else ("text", "data", "raw", "url")
    content = [key for key in ("text", "data", "raw", "url") if key in out]
    if len(content) != 1 or content[0] not in expected:
        raise ValueError(f"a part needs exactly one of {', '.join(expected)}, got {sorted(part)}")
    raw = out.get("raw")
    if isinstance(raw, bytes | bytearray | memoryview):
        out["raw"] = base64.b64encode(raw).decode("ascii")
    elif raw is not None:  # protobuf would skip what is not base64 instead of refusing it
        try:
            base64.b64decode(raw, validate=True)
        except (ValueError, TypeError) as exc:  # binascii.Error is a ValueError
            raise ValueError("file bytes must be bytes or a base64 string") from exc
    return out


def _message(message: MessageInput) -> dict[str, Any]:
    """The caller's message in 1.0 JSON names: a text, file or data part, parts, or a
    message mapping (``role`` ``"user"`` by default)."""
    if isinstance(message, str):
        return {"parts": [{"text": message}]}
    if isinstance(message, bytes | bytearray):
        return {"parts": [_part({"raw": message, "mediaType": "application/octet-stream"})]}
    if isinstance(message, Mapping):
        if "parts" not in message:
            return {"parts": [{"data": dict(message)}]}
        fields = _camel(message)
        if isinstance(fields["parts"], str | bytes) or not isinstance(fields["parts"], Sequence):
            raise ValueError("message 'parts' must be a list of parts")
        role = str(fields.get("role") or "user").lower().removeprefix("role_")
        if role not in ("user", "agent"):
            raise ValueError(f"unknown message role {role!r} (expected 'user' or 'agent')")
        return fields | {"role": "ROLE_" + role.upper(), "parts": list(map(_part, fields["parts"]))}
    if isinstance(message, Sequence):
        return {"parts": [_part(p) for p in cast("Sequence[Any]", message)]}
    raise TypeError(f"cannot send a {type(message).__name__} as a message")


def send_request(
    message: MessageInput,
    metadata: Mapping[str, Any] | None,
    context_id: str | None,
    task_id: str | None,
    skill_id: str | None,
    return_immediately: bool,
) -> pb.SendMessageRequest:
    """The ``SendMessageRequest`` of a caller's message; explicit ids win over the message's,
    ``skill_id`` goes in ``message.metadata.skillId``."""
    fields = {"role": "ROLE_USER"} | {k: v for k, v in _message(message).items() if v is not None}
    fields |= {k: v for k, v in (("contextId", context_id), ("taskId", task_id)) if v}
    fields["messageId"] = fields.get("messageId") or uuid.uuid4().hex
    if skill_id:
        meta = fields.get("metadata") or {}
        if not isinstance(meta, Mapping):
            raise ValueError("message metadata must be a mapping")
        fields["metadata"] = {**meta, "skillId": skill_id}
    _json_numbers(fields, "the message")
    request = pb.SendMessageRequest(message=_parsed(fields, pb.Message()))
    if metadata:
        _json_numbers(metadata, "the request metadata")
        request.metadata.update(dict(metadata))
    # Set even when false: the 0.3 transport then sends ``blocking: true`` explicitly.
    request.configuration.return_immediately = return_immediately
    request.configuration.SetInParent()
    return request


def push_config_request(
    task_id: str, config: str | Mapping[str, Any]
) -> pb.TaskPushNotificationConfig:
    """A push config of a URL or ``{url, id?, token?, authentication?}`` (a 0.3
    ``schemes`` list is accepted)."""
    cfg: Any = {"url": config} if isinstance(config, str) else config
    if not isinstance(cfg, Mapping):
        raise TypeError("a push config must be a URL string or a mapping")
    if not isinstance(cfg.get("url"), str) or not cfg["url"]:
        raise ValueError("a push config needs a 'url'")
    fields = {key: cfg[key] for key in ("url", "id", "token") if cfg.get(key)}
    auth = cfg.get("authentication")
    if auth:
        if not isinstance(auth, Mapping):
            raise ValueError("push 'authentication' must be a mapping")
        scheme = auth.get("scheme") or next(iter(auth.get("schemes") or ()), None)
        if not scheme:
            raise ValueError("push 'authentication' needs a 'scheme'")
        fields["authentication"] = {"scheme": scheme, "credentials": auth.get("credentials")}
    return _parsed(fields | {"taskId": task_id}, pb.TaskPushNotificationConfig())


# -- arguments -------------------------------------------------------------------------
#: An HTTP field value as h11 sends one (RFC 9110 §5.5): visible ASCII, spaces and tabs
#: between its characters only. h11 refuses any other as it sends, repeating the value.
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")


def normalize_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """The agent's base URL, and the ``user:password`` it carried (then taken out of it, so
    that no message repeats the password)."""
    if not isinstance(url, str):
        raise ValueError(f"agent URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"agent URL must be an absolute http(s) URL, got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"agent URL must not carry a query or fragment, got {url!r}")
    userinfo, at, host = parts.netloc.rpartition("@")
    credentials = None
    if at:
        user, _, password = userinfo.partition(":")
        credentials = (unquote(user), unquote(password))
    base = parts._replace(netloc=host).geturl().rstrip("/")
    for path in CARD_PATHS:  # a card URL given by mistake names the same agent
        base = base.removesuffix(path)
    return base.rstrip("/"), credentials


def header_value(value: str, what: str) -> str:
    """*value* when it can be sent as an HTTP header value. httpx refuses it only later,
    with a bare encoding error (the value's position) or, for a line break, as a failed
    connection; the value (often a credential) is not repeated here."""
    if not isinstance(value, str) or not sendable(value):
        raise ValueError(
            f"{what} must be ASCII text without line breaks, control characters or spaces "
            "at either end (an HTTP header value)"
        )
    return value


def sendable(value: str) -> bool:
    """Whether *value* can be sent as an HTTP header value."""
    return _FIELD_VALUE.fullmatch(value) is not None


def positive(timeout: float | None) -> float | None:
    """*timeout* when it is ``None`` or a positive number of seconds."""
    if timeout is not None and not timeout > 0:  # NaN too: every wait would end at once
        raise ValueError("timeout must be positive (or None for no timeout)")
    return timeout


def stream_bounds(max_retries: int, timeout: float | None) -> tuple[int, float | None]:
    """A stream's *max_retries* (0 or more) and *timeout* (:func:`positive`)."""
    if max_retries < 0:
        raise ValueError("max_retries must be 0 or more")
    return max_retries, positive(timeout)


def require_id(value: str, what: str = "task_id") -> str:
    """*value* when it is a non-empty string (an id named *what*)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


# -- results ----------------------------------------------------------------------------
FINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})
_KINDS = {
    "Task": "task",
    "Message": "message",
    "TaskStatusUpdateEvent": "status-update",
    "TaskArtifactUpdateEvent": "artifact-update",
}
#: message fields a2a.proto marks REQUIRED: read as empty when an agent leaves them out
_ALWAYS = frozenset({"TaskStatus", "Artifact"})


def _ints(value: Any) -> Any:
    """Integral floats → int: protobuf carries every JSON number as a double (7 → 7.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _enum(name: str) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required``, ``ROLE_USER`` → ``user``."""
    word = re.sub(r"^(TASK_STATE|ROLE)_", "", name).lower().replace("_", "-")
    return "unknown" if word in ("", "unspecified") else word


def _json(value: Proto, name: str) -> Any:
    """A well-known type (``Struct``, ``Value``, ``Timestamp``) as JSON."""
    try:
        return _ints(MessageToDict(value))
    except ValueError as exc:  # Python's JSON reader (and gRPC) give protobuf NaN and inf
        raise InvalidAgentResponseError(
            f"agent returned a {name} that JSON cannot hold: {exc} (NaN and infinity are "
            "no JSON number)"
        ) from None


def plain(message: Proto) -> dict[str, Any]:
    """*message* in the client's shape: every field under its JSON name, absent ones as
    ``None``, ``[]`` or ``{}``; enums as lowercase words; JSON values (``data``,
    ``metadata``) with integral numbers as ``int``; a ``kind`` on tasks, messages and
    events, a ``type`` on parts (``text``, ``data`` or ``file``)."""
    descriptor = message.DESCRIPTOR
    out: dict[str, Any] = {}
    if descriptor.name in _KINDS:
        out["kind"] = _KINDS[descriptor.name]
    elif descriptor.name == "Part":
        content = message.WhichOneof("content") or "text"
        out["type"] = "file" if content in ("raw", "url") else content
    for field in descriptor.fields:
        one_of, value, target = (
            field.containing_oneof,
            getattr(message, field.name),
            field.message_type,
        )
        if one_of is not None and message.WhichOneof(one_of.name) != field.name:
            continue
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            value = [plain(item) for item in value] if target else list(value)
        elif field.enum_type is not None:  # a number without a name (a newer enum) too
            known = field.enum_type.values_by_number.get(value)
            value = _enum(known.name if known is not None else "")
        elif target is not None and target.full_name.startswith("google.protobuf."):
            has = message.HasField(field.name)
            value = (
                _json(value, field.json_name) if has else {} if target.name == "Struct" else None
            )
        elif target is not None:
            has = message.HasField(field.name) or target.name in _ALWAYS
            value = plain(value) if has else None
        elif isinstance(value, bytes):
            value = base64.b64encode(value).decode("ascii")
        elif value == "" and one_of is None:
            value = None
        out[field.json_name] = value
    return out


def task(result: pb.Task) -> dict[str, Any]:
    """A task the agent answered with; one without an id is no task."""
    if not result.id:
        raise InvalidAgentResponseError(f"agent returned a task without an id: {result!r:.200}")
    return plain(result)


def event(result: Proto, wire: Any = None) -> dict[str, Any] | None:
    """A ``StreamResponse`` / ``SendMessageResponse`` → client shape; ``None`` when empty.
    *wire* (the result as received) carries a 0.3 agent's ``final: true``."""
    name = result.WhichOneof("payload")
    if name is None:
        return None
    if name == "task":
        return task(cast("pb.Task", getattr(result, name)))
    out = plain(getattr(result, name))
    if name == "status_update":
        sent = wire.get("statusUpdate", wire) if isinstance(wire, Mapping) else None
        sent_final = isinstance(sent, Mapping) and sent.get("final") is True
        out["final"] = out["status"]["state"] in FINAL_STATES | INTERRUPTED_STATES or sent_final
    return out


def of_task(ev: Mapping[str, Any], task_id: str | None, method: str) -> dict[str, Any]:
    """*ev* (a task or event in the client's shape) when it is about *task_id* (``None``:
    any task; a message may name none), else :class:`InvalidAgentResponseError`: an answer
    about another task is no answer about this one, whose end it would misreport."""
    named = ev.get("id") if ev.get("kind") == "task" else ev.get("taskId")
    if task_id is not None and named is not None and named != task_id:
        raise InvalidAgentResponseError(
            f"agent answered {method} for task {task_id[:200]} with task {str(named)[:200]}"
        )
    return dict(ev)


def is_final(ev: Mapping[str, Any]) -> bool:
    """True when no further events follow for this request (the stream may end)."""
    if ev["kind"] == "task":
        return ev["status"]["state"] in FINAL_STATES
    return ev["kind"] == "message" or bool(ev.get("final"))


def push_config(result: pb.TaskPushNotificationConfig) -> dict[str, Any]:
    """A push config as A2A defines it (no delivery status: ``A2AClient.push_status``)."""
    out = plain(result)
    del out["tenant"]
    return out
