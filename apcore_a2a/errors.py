"""Errors apcore-a2a answers with besides the A2A specification's own.

Each is an a2a-sdk ``A2AError``, so every binding reports it the way it reports the SDK's
errors; :func:`register` adds them to the SDK's code tables (JSON-RPC code, HTTP status,
gRPC status, ``google.rpc.ErrorInfo`` reason). The codes sit at the top of the range the
A2A specification leaves to implementations (-32001 to -32099), far from the codes A2A
itself uses.

* :class:`TaskBusyError`: JSON-RPC -32090, HTTP 409, gRPC FAILED_PRECONDITION, ``TASK_BUSY``
* :class:`QuotaExceededError`: -32091, HTTP 429, RESOURCE_EXHAUSTED, ``QUOTA_EXCEEDED``
* :class:`StoreUnavailableError`: -32092, HTTP 503, UNAVAILABLE, ``TASK_STORE_UNAVAILABLE``
* :class:`UnauthenticatedError`: -32093, HTTP 401, UNAUTHENTICATED, ``UNAUTHENTICATED``
* :class:`PermissionDeniedError`: -32094, HTTP 403, PERMISSION_DENIED, ``PERMISSION_DENIED``

The last two carry the seconds to wait in their data as ``retryAfter`` (REST answers also
send it as ``Retry-After``). :func:`register` also puts the spec's HTTP and gRPC statuses
(§5.4) where a2a-sdk 1.3 answers others (:data:`SPEC_HTTP_STATUS`, :data:`SPEC_GRPC_STATUS`).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

__all__ = [
    "RETRY_AFTER_KEY",
    "SPEC_GRPC_STATUS",
    "SPEC_HTTP_STATUS",
    "MissingExtraError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "StoreUnavailableError",
    "TaskBusyError",
    "UnauthenticatedError",
    "register",
]

#: Key of the error data (ErrorInfo metadata) holding the seconds to wait before retrying.
RETRY_AFTER_KEY = "retryAfter"


class MissingExtraError(RuntimeError):
    """A setting asks for an optional feature whose extra is not installed.

    Not an A2A error: it stops the agent from being built. Its message names the extra to
    install (``pip install 'apcore-a2a[metrics]'``); the CLI prints it as one line.
    """


class TaskBusyError(A2AError):
    """The task is running (or another request just claimed it); try again when it is
    ``input-required`` or has ended. Nothing was changed."""

    message = "Task is busy: a message can only continue a task that waits for input"


class QuotaExceededError(A2AError):
    """The caller used up a quota (tasks, streams, push configs).

    *retry_after* (seconds) says when trying again can succeed; ``None`` when only an
    action of the caller frees room (deleting a push config, say): then no retry hint.
    """

    message = "Quota exceeded"

    def __init__(
        self,
        message: str | None = None,
        data: dict[str, Any] | None = None,
        *,
        retry_after: float | None = 1.0,
    ) -> None:
        self.retry_after = retry_after
        hint = {} if retry_after is None else {RETRY_AFTER_KEY: _seconds(retry_after)}
        super().__init__(message, {**(data or {}), **hint} or None)


class StoreUnavailableError(A2AError):
    """The task store cannot be reached right now; the request may be retried."""

    message = "Task store unavailable; retry later"

    def __init__(
        self,
        message: str | None = None,
        data: dict[str, Any] | None = None,
        *,
        retry_after: float = 2.0,
    ) -> None:
        super().__init__(message, {**(data or {}), RETRY_AFTER_KEY: _seconds(retry_after)})


class UnauthenticatedError(A2AError):
    """Credentials are missing or were not accepted (spec §3.3.2, authentication errors)."""

    message = "Missing or invalid credentials"


class PermissionDeniedError(A2AError):
    """The caller is authenticated but lacks a role or scope the agent requires
    (spec §3.3.2, authorization errors)."""

    message = "Permission denied"


def _seconds(value: float) -> int:
    return max(1, round(value))


class _Mapping(NamedTuple):
    code: int
    http: int
    grpc: str
    reason: str


_TABLE: dict[type[A2AError], _Mapping] = {
    TaskBusyError: _Mapping(-32090, 409, "FAILED_PRECONDITION", "TASK_BUSY"),
    QuotaExceededError: _Mapping(-32091, 429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"),
    StoreUnavailableError: _Mapping(-32092, 503, "UNAVAILABLE", "TASK_STORE_UNAVAILABLE"),
    UnauthenticatedError: _Mapping(-32093, 401, "UNAUTHENTICATED", "UNAUTHENTICATED"),
    PermissionDeniedError: _Mapping(-32094, 403, "PERMISSION_DENIED", "PERMISSION_DENIED"),
}
_lock = threading.Lock()
_registered = False


def register() -> None:
    """Teach the a2a-sdk's error tables these errors (idempotent, additive).

    The SDK looks errors up by exact type in module-level tables (some copied at import),
    so each table that exists gets the entries of our classes only.
    """
    global _registered
    with _lock:
        if _registered:
            return
        from a2a.utils import errors

        for cls, row in _TABLE.items():
            errors.JSON_RPC_ERROR_CODE_MAP[cls] = row.code
            errors.A2A_ERROR_MAPPING[cls] = errors.ErrorMapping(row.http, row.grpc, row.reason)
            errors.A2A_ERROR_REASONS[cls] = row.reason
            errors.A2A_REASON_TO_ERROR[row.reason] = cls
        _register_jsonrpc()
        _register_grpc()
        _apply_spec_statuses()
        _registered = True


def _register_jsonrpc() -> None:
    from a2a.server.jsonrpc_models import JSONRPCError
    from a2a.server.request_handlers import response_helpers

    exceptions = getattr(response_helpers, "EXCEPTION_MAP", None)
    if isinstance(exceptions, dict):
        # Without an entry the SDK builds its -32603 model, which pins the code.
        for cls in _TABLE:
            exceptions[cls] = JSONRPCError
    # The SDK's routes package must load first: importing the 0.3 adapter on its own
    # runs into an import cycle inside the SDK.
    import a2a.server.routes  # noqa: F401
    from a2a.compat.v0_3 import jsonrpc_adapter

    known = getattr(jsonrpc_adapter, "_V03_ERROR_CODES", None)
    if isinstance(known, frozenset):
        # The 0.3 adapter reports codes 0.3 did not define as -32603 (an internal error);
        # ours are server-defined codes a 0.3 client can act on, so they pass unchanged.
        jsonrpc_adapter._V03_ERROR_CODES = known | {row.code for row in _TABLE.values()}


def _register_grpc() -> None:
    try:
        import grpc
        from a2a.server.request_handlers import grpc_handler
    except ImportError:
        return
    table = getattr(grpc_handler, "_ERROR_CODE_MAP", None)
    if isinstance(table, dict):
        for cls, row in _TABLE.items():
            table[cls] = getattr(grpc.StatusCode, row.grpc)


#: HTTP status of the A2A errors where the SDK's differs from the spec (§5.4).
SPEC_HTTP_STATUS: dict[type[A2AError], int] = {
    TaskNotCancelableError: 409,
    ContentTypeNotSupportedError: 415,
    InvalidAgentResponseError: 502,
}
#: gRPC status (name) of the A2A errors where the SDK's differs from the spec (§5.4).
SPEC_GRPC_STATUS: dict[type[A2AError], str] = {
    PushNotificationNotSupportedError: "UNIMPLEMENTED",
    UnsupportedOperationError: "UNIMPLEMENTED",
    VersionNotSupportedError: "UNIMPLEMENTED",
}


def _apply_spec_statuses() -> None:
    """Where a2a-sdk 1.3 maps an A2A error to another HTTP/gRPC status than spec §5.4 says
    (TaskNotCancelable 400 instead of 409, ...), put the spec's in the SDK's tables. The
    JSON-RPC codes and ErrorInfo reasons, which clients map errors by, stay as they are;
    tests/interop/test_conformance.py notices when the SDK changes its own."""
    from a2a.utils import errors

    for cls in {*SPEC_HTTP_STATUS, *SPEC_GRPC_STATUS}:
        sdk = errors.A2A_ERROR_MAPPING[cls]
        errors.A2A_ERROR_MAPPING[cls] = errors.ErrorMapping(
            SPEC_HTTP_STATUS.get(cls, sdk.http_code),
            SPEC_GRPC_STATUS.get(cls, sdk.grpc_status),
            sdk.reason,
        )
    try:
        import grpc
        from a2a.server.request_handlers import grpc_handler
    except ImportError:  # the grpc extra is not installed: nothing serves gRPC
        return
    for cls, status in SPEC_GRPC_STATUS.items():
        grpc_handler._ERROR_CODE_MAP[cls] = getattr(grpc.StatusCode, status)
