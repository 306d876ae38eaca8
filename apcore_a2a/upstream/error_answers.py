"""Error answers on our routes and servicers: spec §5.4 statuses, and our own errors.

a2a-sdk 1.3 (1) answers six errors with statuses other than spec §5.4's (the tables
below; it says HTTP 400/400/500 and gRPC ``FAILED_PRECONDITION``; its JSON-RPC codes and
``ErrorInfo`` reasons are right), and (2) looks answers up by exact type in process-wide
tables (``a2a.utils.errors``, ``grpc_handler._ERROR_CODE_MAP``), where our errors could be
added only for every agent in the process: unknown there, ours leave the SDK as internal
errors carrying ``WIRE_KEY``. So nothing is written into the SDK: on HTTP the guard passes
each error object through :func:`correct_error` (also the REST status line); on gRPC
:class:`Servicer` and :class:`CompatServicer` answer them in ``abort_context``.
``tests/upstream/test_error_answers.py`` fails when the SDK's own answers change.
"""

from __future__ import annotations

from typing import Any

from a2a.utils.errors import (
    A2A_ERROR_MAPPING,
    A2AError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

from apcore_a2a.errors import OWN_ERRORS, WIRE_KEY, OwnError

__all__ = ["SPEC_GRPC_STATUS", "SPEC_HTTP_STATUS", "correct_error", "grpc_answer"]

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
# ErrorInfo reason -> (HTTP status, gRPC status name), as REST bodies carry both.
_SPEC_REST: dict[str, tuple[int, str]] = {
    A2A_ERROR_MAPPING[cls].reason: (
        SPEC_HTTP_STATUS.get(cls, A2A_ERROR_MAPPING[cls].http_code),
        SPEC_GRPC_STATUS.get(cls, A2A_ERROR_MAPPING[cls].grpc_status),
    )
    for cls in {*SPEC_HTTP_STATUS, *SPEC_GRPC_STATUS}
}


def _own_reason(holder: Any) -> tuple[Any, str | None]:
    """(*holder* without our marker, the reason it named) for one data/metadata dict."""
    if isinstance(holder, dict) and isinstance(holder.get(WIRE_KEY), str):
        rest = {k: v for k, v in holder.items() if k != WIRE_KEY}
        return rest, holder[WIRE_KEY]
    return holder, None


def correct_error(error: dict[str, Any]) -> dict[str, Any]:
    """One error object as the SDK rendered it (JSON-RPC 1.0 or 0.3, or REST), answered
    as our errors and spec §5.4 say. A REST error's ``code`` is its HTTP status."""
    rest = isinstance(error.get("status"), str)
    key = "details" if rest else "data"
    out = dict(error)
    holder, reason = _own_reason(error.get(key))  # a 0.3 JSON-RPC error: the error's data
    if reason is not None:
        out[key] = holder or None
    elif isinstance(holder, list):
        items = []
        for item in holder:
            metadata, named = _own_reason(item.get("metadata") if isinstance(item, dict) else None)
            if named is not None:
                item, reason = {**item, "reason": named, "metadata": metadata}, named
            elif reason is None and isinstance(item, dict) and rest:
                reason = item.get("reason")  # the SDK's reason: spec statuses below
            items.append(item)
        out[key] = items
    if out.get(key) is None:
        out.pop(key, None)
    own = OWN_ERRORS.get(reason or "")
    if own is not None:
        wire = own.wire
        out.update({"code": wire.http, "status": wire.grpc} if rest else {"code": wire.code})
    elif rest and reason in _SPEC_REST:
        out["code"], out["status"] = _SPEC_REST[reason]
    return out


def grpc_answer(error: A2AError) -> tuple[str, str] | None:
    """(gRPC status name, ErrorInfo reason) for an error the SDK answers otherwise."""
    if isinstance(error, OwnError):
        return error.wire.grpc, error.wire.reason
    status = SPEC_GRPC_STATUS.get(type(error))
    if status is None:
        return None
    return status, A2A_ERROR_MAPPING[type(error)].reason


try:
    import grpc
    import grpc.aio
    from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
    from a2a.server.request_handlers.grpc_handler import GrpcHandler
    from a2a.utils.grpc_status import status_to_grpc
    from google.protobuf import any_pb2
    from google.rpc import error_details_pb2, status_pb2
except ImportError:  # the grpc extra is not installed: nothing serves gRPC
    pass
else:
    __all__ += ["CompatServicer", "Servicer"]

    class Servicer(GrpcHandler):
        """The SDK's A2A 1.0 servicer; :func:`grpc_answer` errors get their status here."""

        async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
            answer = grpc_answer(error)
            if answer is None:
                await super().abort_context(error, context)
                return
            status, reason = answer
            detail = any_pb2.Any()
            detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="a2a-protocol.org"))
            code = getattr(grpc.StatusCode, status)
            rich = status_to_grpc(
                status_pb2.Status(code=code.value[0], message=error.message, details=[detail])
            )
            trailing = tuple(context.trailing_metadata() or ())
            context.set_trailing_metadata(trailing + tuple(rich.trailing_metadata))
            await context.abort(rich.code, rich.details)

    class CompatServicer(CompatGrpcHandler):
        """The SDK's A2A 0.3 servicer, with the same statuses as :class:`Servicer`."""

        async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
            answer = grpc_answer(error)
            if answer is None:
                await super().abort_context(error, context)
                return
            code = getattr(grpc.StatusCode, answer[0])
            await context.abort(code, f"{type(error).__name__}: {error.message}")
