"""Typed exceptions raised by :class:`~apcore_a2a.client.A2AClient`.

Every error an agent can answer with (a JSON-RPC error object, or a REST or gRPC error
naming a ``google.rpc.ErrorInfo`` reason) becomes an :class:`A2ARemoteError` subclass
chosen by its JSON-RPC code, keeping ``code``, ``message`` and ``data``. Failures to
reach the agent at all (network, timeout, another non-2xx HTTP status) are
:class:`A2AConnectionError`. Everything inherits :class:`A2AClientError`.

An agent's words are not trusted with the caller's memory or log: every error holds a
message of at most :data:`MAX_MESSAGE_CHARS` characters (a longer one is cut, saying how
long it was), and so do its other texts (the URL a card named); a remote error's ``data``
only while it is at most :data:`MAX_DATA_CHARS` characters of JSON (else ``None``, its
message saying so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from a2a.utils.errors import A2A_ERROR_MAPPING, JSON_RPC_ERROR_CODE_MAP

__all__ = [
    "A2AAuthenticationError",
    "A2AClientError",
    "A2AConnectionError",
    "A2ADiscoveryError",
    "A2ARemoteError",
    "A2AServerError",
    "CardVerificationError",
    "ContentTypeNotSupportedError",
    "CrossOriginEndpointError",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "InvalidAgentResponseError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONParseError",
    "MethodNotFoundError",
    "PushNotificationNotSupportedError",
    "QuotaExceededError",
    "StoreUnavailableError",
    "TaskBusyError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnsupportedOperationError",
    "VersionNotSupportedError",
]

#: The longest message an error of the client holds: an agent can answer megabytes.
MAX_MESSAGE_CHARS = 4096
#: The largest ``data`` a remote error keeps, in characters of its compact JSON.
MAX_DATA_CHARS = 16 * 1024


def _shortened(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}... (cut: {len(message)} characters)"


def _fits(data: Any) -> bool:
    """Whether *data* is at most :data:`MAX_DATA_CHARS` characters of JSON, written only
    as far as needed to tell."""
    written = 0
    try:
        for chunk in json.JSONEncoder(separators=(",", ":"), default=repr).iterencode(data):
            written += len(chunk)
            if written > MAX_DATA_CHARS:
                return False
    except (RecursionError, ValueError):  # deeper than Python writes, or a cycle
        return False
    return True


class A2AClientError(Exception):
    """Base class of every error raised by the A2A client.

    ``message`` is at most :data:`MAX_MESSAGE_CHARS` characters: a longer one is cut there
    and ends ``... (cut: N characters)``, N its whole length."""

    def __init__(self, message: str) -> None:
        message = _shortened(message)
        super().__init__(message)
        self.message = message


class A2AConnectionError(A2AClientError):
    """The agent could not be reached, timed out, or answered with a non-2xx HTTP status.

    ``status_code`` is the HTTP status when the agent answered, else ``None``.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class A2AAuthenticationError(A2AConnectionError):
    """The agent refused the credentials (HTTP 401 or 403)."""


class A2ADiscoveryError(A2AClientError):
    """The agent card could not be fetched or is not a valid card."""


class CrossOriginEndpointError(A2ADiscoveryError):
    """The agent card names an interface URL outside the agent's origin.

    Origin = scheme, host and port of the URL the client was given (where the card came
    from); ``https`` to ``http`` counts as another origin. ``url`` is the URL the card
    named, cut as a message is (a card may name megabytes), ``agent_origin`` the agent's
    origin. Pass ``allow_other_origins=True`` to follow such URLs; the client's
    credentials are never sent to them.
    """

    def __init__(self, message: str, *, url: str, agent_origin: str) -> None:
        super().__init__(message)
        self.url = _shortened(url)
        self.agent_origin = agent_origin


class CardVerificationError(A2ADiscoveryError):
    """The agent card's signature is missing, does not verify, or cannot be checked.

    ``reason`` says which: ``"missing"`` (no signature), ``"invalid"`` (no signature
    verifies: the card was changed after signing, or signed with another key),
    ``"unknown_key"`` (signed with a key not in the key set) or ``"no_keys"`` (no usable
    key set).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class A2ARemoteError(A2AClientError):
    """The agent answered with an A2A / JSON-RPC error object.

    ``code`` is the JSON-RPC error code, a 32-bit integer (an agent's code that is none, such
    as a string, a float or ``10**400``, is read as -32603). ``data`` is the error's
    ``data`` member as sent, or ``None`` when its JSON is over :data:`MAX_DATA_CHARS`
    characters: the message then ends saying it was not kept.
    """

    default_code: ClassVar[int] = -32603

    def __init_subclass__(cls, code: int = -32603) -> None:
        cls.default_code = code

    def __init__(self, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = self.default_code if code is None else code
        kept = _fits(data)
        self.data = data if kept else None
        if not kept:
            # After the cut, so that no message is cut before it says so.
            self.message += f" (its data, over {MAX_DATA_CHARS} characters of JSON, not kept)"
            self.args = (self.message,)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r})"


class TaskNotFoundError(A2ARemoteError, code=-32001):
    """-32001: the task does not exist (or belongs to another caller)."""


class TaskNotCancelableError(A2ARemoteError, code=-32002):
    """-32002: the task is already in a terminal state."""


class PushNotificationNotSupportedError(A2ARemoteError, code=-32003):
    """-32003: the agent does not support push notifications."""


class UnsupportedOperationError(A2ARemoteError, code=-32004):
    """-32004: the agent does not support this operation (or not in this state)."""


class ContentTypeNotSupportedError(A2ARemoteError, code=-32005):
    """-32005: a part's media type is not accepted by the agent."""


class InvalidAgentResponseError(A2ARemoteError, code=-32006):
    """-32006: the agent produced an invalid response (also raised for unparsable replies)."""


class ExtendedAgentCardNotConfiguredError(A2ARemoteError, code=-32007):
    """-32007: the agent has no extended agent card."""


class ExtensionSupportRequiredError(A2ARemoteError, code=-32008):
    """-32008: the agent requires an extension the client did not declare."""


class VersionNotSupportedError(A2ARemoteError, code=-32009):
    """-32009: the agent does not speak the requested A2A protocol version."""


class JSONParseError(A2ARemoteError, code=-32700):
    """-32700: the agent could not parse the request body."""


class InvalidRequestError(A2ARemoteError, code=-32600):
    """-32600: the request is not a valid JSON-RPC request."""


class MethodNotFoundError(A2ARemoteError, code=-32601):
    """-32601: the agent does not know the method (e.g. a 0.3 call to a 1.0-only agent)."""


class InvalidParamsError(A2ARemoteError, code=-32602):
    """-32602: the request parameters (or the module input) are invalid."""


class TaskBusyError(A2ARemoteError, code=-32090):
    """-32090: the task is running (or another follow-up won it); try again later."""


class QuotaExceededError(A2ARemoteError, code=-32091):
    """-32091: a per-caller or per-task limit is reached (e.g. push configs per task)."""


class StoreUnavailableError(A2ARemoteError, code=-32092):
    """-32092: the agent's task store is unreachable right now; retryable."""


class A2AServerError(A2ARemoteError, code=-32603):
    """-32603 or any code without a dedicated class; ``code`` and ``data`` are kept."""


#: the codes a remote error keeps: a 32-bit integer (any other is read as -32603)
_CODE_RANGE = range(-(2**31), 2**31)
_BY_CODE: dict[int | None, type[A2ARemoteError]] = {
    cls.default_code: cls for cls in A2ARemoteError.__subclasses__() if cls is not A2AServerError
}


def error_from_rpc(error: Any) -> A2ARemoteError:
    """The typed exception of a JSON-RPC ``error`` member; a malformed one, or one whose
    ``code`` is no 32-bit integer, is :class:`A2AServerError` with code -32603."""
    if not isinstance(error, dict):
        return A2AServerError(f"agent returned a malformed error: {error!r}")
    code, message = error.get("code"), error.get("message")
    text = message if isinstance(message, str) and message else "agent returned an error"
    # JSON-RPC 2.0 §5.1: an integer; one past 32 bits (A2A's codes are, gRPC's int32) is
    # no code either, and an agent's 10**400 is no number for a log line or a span.
    whole = isinstance(code, int) and not isinstance(code, bool)
    code = code if whole and code in _CODE_RANGE else None
    cls = _BY_CODE.get(code, A2AServerError)  # no code: no entry either
    return cls(text, code=code, data=error.get("data"))


#: ErrorInfo reason -> JSON-RPC code: the A2A errors, then apcore-a2a's own.
_REASON_CODES = {m.reason: JSON_RPC_ERROR_CODE_MAP[c] for c, m in A2A_ERROR_MAPPING.items()}
_REASON_CODES |= {"TASK_BUSY": -32090, "QUOTA_EXCEEDED": -32091, "TASK_STORE_UNAVAILABLE": -32092}
_BY_NAME = {cls.__name__: cls for cls in _BY_CODE.values()}


def error_from_details(error: Mapping[str, Any], name: Any = None) -> A2ARemoteError | None:
    """The typed exception of a REST or gRPC error (a ``google.rpc.Status``) by the
    ErrorInfo reason in its ``details``, else by a 0.3 error's type name (*name*, else its
    ``type``); ``None`` for any other."""
    message, details = str(error.get("message") or ""), error.get("details")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type")).endswith("rpc.ErrorInfo"):
            code = _REASON_CODES.get(str(detail.get("reason")))
            if code is not None:
                return error_from_rpc({"code": code, "message": message, "data": details})
    cls = _BY_NAME.get(str(name or error.get("type")))
    return cls(message or "agent returned an error") if cls is not None else None
