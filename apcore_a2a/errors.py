"""Errors apcore-a2a answers with besides the A2A specification's own.

Each is an a2a-sdk ``A2AError`` with its own JSON-RPC code, HTTP status, gRPC status and
``google.rpc.ErrorInfo`` reason (:attr:`OwnError.wire`, on each class below). The codes sit
at the top of the range the A2A specification leaves to implementations (-32001 to -32099),
far from the codes A2A itself uses. Quota and store errors carry the seconds to wait in
their data as ``retryAfter``, as text: the SDK sends the data as ``google.rpc.ErrorInfo``
metadata, a ``map<string, string>`` (REST answers also send ``Retry-After``). The SDK keeps
its error answers in process-wide tables, so these are answered by our own routes and
servicers (:mod:`apcore_a2a.upstream.error_answers`), never by writing those tables.
"""

from __future__ import annotations

from types import EllipsisType
from typing import Any, ClassVar, NamedTuple

from a2a.utils.errors import A2AError

__all__ = [
    "RETRY_AFTER_KEY",
    "MissingExtraError",
    "OwnError",
    "PermissionDeniedError",
    "PushConfigUnreadableError",
    "QuotaExceededError",
    "StoreUnavailableError",
    "TaskBusyError",
    "TaskUnreadableError",
    "UnauthenticatedError",
    "Wire",
]

#: Key of the error data (ErrorInfo metadata) holding the seconds to wait before retrying.
RETRY_AFTER_KEY = "retryAfter"
#: Key of the error data naming one of our errors while the SDK renders it (removed
#: from the answer by :mod:`apcore_a2a.upstream.error_answers`).
WIRE_KEY = "apcore_a2a.error"


class Wire(NamedTuple):
    """How one of our errors is answered on each binding."""

    code: int
    http: int
    grpc: str
    reason: str


class MissingExtraError(RuntimeError):
    """A setting asks for an optional feature whose extra is not installed.

    Not an A2A error: it stops the agent from being built. Its message names the extra to
    install (``pip install 'apcore-a2a[metrics]'``); the CLI prints it as one line.
    """


class OwnError(A2AError):
    """An error of ours: its :attr:`wire` says how each binding answers it."""

    wire: ClassVar[Wire]
    #: seconds after which trying again can succeed, unless the raiser passes
    #: ``retry_after`` (``None``: only an action of the caller frees room, so no hint)
    retry_after: float | None = None

    def __init__(
        self,
        message: str | None = None,
        data: dict[str, Any] | None = None,
        *,
        retry_after: float | EllipsisType | None = ...,
    ) -> None:
        if not isinstance(retry_after, EllipsisType):
            self.retry_after = retry_after
        seconds = None if self.retry_after is None else max(1, round(self.retry_after))
        hint = {} if seconds is None else {RETRY_AFTER_KEY: str(seconds)}
        super().__init__(message, {**(data or {}), **hint, WIRE_KEY: self.wire.reason})


class TaskBusyError(OwnError):
    """The task is running (or another request just claimed it); try again when it is
    ``input-required`` or has ended. Nothing was changed."""

    message = "Task is busy: a message can only continue a task that waits for input"
    wire = Wire(-32090, 409, "FAILED_PRECONDITION", "TASK_BUSY")


class QuotaExceededError(OwnError):
    """The caller used up a quota (tasks, streams, push configs)."""

    message = "Quota exceeded"
    wire = Wire(-32091, 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED")
    retry_after = 1.0


class StoreUnavailableError(OwnError):
    """The task store cannot be reached right now; the request may be retried."""

    message = "Task store unavailable; retry later"
    wire = Wire(-32092, 503, "UNAVAILABLE", "TASK_STORE_UNAVAILABLE")
    retry_after = 2.0


class UnauthenticatedError(OwnError):
    """Credentials are missing or were not accepted (spec §3.3.2, authentication errors)."""

    message = "Missing or invalid credentials"
    wire = Wire(-32093, 401, "UNAUTHENTICATED", "UNAUTHENTICATED")


class PermissionDeniedError(OwnError):
    """The caller is authenticated but lacks a role or scope the agent requires
    (spec §3.3.2, authorization errors)."""

    message = "Permission denied"
    wire = Wire(-32094, 403, "PERMISSION_DENIED", "PERMISSION_DENIED")


class TaskUnreadableError(OwnError):
    """The task is stored, but its stored row holds no task this agent can read (JSON its
    protocol version does not describe: an older release's row, a hand edit, a partial
    write). The row is left as it is for the operator; ``ListTasks`` pages leave it out
    (``docs/storage.md``, *Unreadable rows*)."""

    message = "The stored task cannot be read"
    wire = Wire(-32095, 500, "DATA_LOSS", "TASK_UNREADABLE")

    @classmethod
    def of(cls, task_id: str) -> TaskUnreadableError:
        """The error for the task *task_id* (its message names it)."""
        return cls(
            f"Task {task_id} is stored but cannot be read (its stored data is damaged); "
            "the agent's operator can restore it"
        )


class PushConfigUnreadableError(OwnError):
    """The push notification config is stored, but its stored row holds no config this
    agent can read (JSON its protocol version does not describe, a ciphertext of another
    key). Lists leave it out and no event is sent to it; its owner can delete it
    (``docs/storage.md``, *Unreadable rows*)."""

    message = "The stored push notification config cannot be read"
    wire = Wire(-32096, 500, "DATA_LOSS", "PUSH_CONFIG_UNREADABLE")

    @classmethod
    def of(cls, task_id: str, config_id: str) -> PushConfigUnreadableError:
        """The error for the config *config_id* of the task *task_id* (its message names
        both)."""
        return cls(
            f"Push notification config {config_id} of task {task_id} is stored but cannot "
            "be read (its stored data is damaged, or encrypted with another key); delete "
            "it and register it again"
        )


class WeakKeyError(ValueError):
    """An HMAC secret shorter than the hash of an algorithm it is allowed for: RFC 7518
    3.2 requires at least 32 bytes for HS256, 48 for HS384 and 64 for HS512. Here, not
    with the JWT authenticator, so the factory can name it without importing PyJWT."""


#: Our errors by their ErrorInfo reason.
OWN_ERRORS: dict[str, type[OwnError]] = {cls.wire.reason: cls for cls in OwnError.__subclasses__()}
