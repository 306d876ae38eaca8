"""Our own errors (``apcore_a2a.errors``) answered with their own codes.

a2a-sdk answers by exact type from process-wide tables, so nothing is written into it: on
HTTP the rendered error object passes through :func:`correct_error`; on gRPC the servicers'
public ``abort_context`` answers them.
"""

from __future__ import annotations

import apcore_a2a.upstream.client_first  # noqa: F401  (before the SDK server: see it)

# isort: split
from typing import Any

from a2a.utils.errors import A2AError

from apcore_a2a.errors import OWN_ERRORS, WIRE_KEY, OwnError


def _own_reason(holder: Any) -> tuple[Any, str | None]:
    """(*holder* without our marker, the reason it named) for one data/metadata dict."""
    if isinstance(holder, dict) and isinstance(holder.get(WIRE_KEY), str):
        rest = {k: v for k, v in holder.items() if k != WIRE_KEY}
        return rest, holder[WIRE_KEY]
    return holder, None


def correct_error(error: dict[str, Any]) -> dict[str, Any]:
    """One error object as the SDK rendered it (JSON-RPC 1.0 or 0.3, or REST), with our
    own errors' codes; the SDK's own errors are left as they are. A REST error's ``code``
    is its HTTP status."""
    rest = isinstance(error.get("status"), str)
    key = "details" if rest else "data"
    holder, reason = _own_reason(error.get(key))  # a 0.3 JSON-RPC error: the error's data
    if reason is None and not isinstance(holder, list):
        return error
    out = dict(error)
    if reason is None:
        items = []
        for item in holder:
            metadata, named = _own_reason(item.get("metadata") if isinstance(item, dict) else None)
            if named is not None:
                item, reason = {**item, "reason": named, "metadata": metadata}, named
            items.append(item)
        out[key] = items
    elif holder:
        out[key] = holder
    else:
        del out[key]
    own = OWN_ERRORS.get(reason or "")
    if own is not None:
        wire = own.wire
        out.update({"code": wire.http, "status": wire.grpc} if rest else {"code": wire.code})
    return out


try:
    import grpc
    import grpc.aio
    from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
    from a2a.server.request_handlers.grpc_handler import GrpcHandler
    from a2a.utils.grpc_status import status_to_grpc
    from google.rpc import error_details_pb2, status_pb2
except ImportError:  # the grpc extra is not installed: nothing serves gRPC
    pass
else:

    async def abort(
        context: grpc.aio.ServicerContext,
        code: grpc.StatusCode,
        message: str,
        reason: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """End the call with *code*, the ``google.rpc.Status`` details of spec §10.6
        (``ErrorInfo`` with *reason*) and, for a refusal worth retrying, a
        ``google.rpc.RetryInfo`` of *retry_after* seconds (HTTP's ``Retry-After``)."""
        status = status_pb2.Status(code=code.value[0], message=message)
        if reason is not None:
            info = error_details_pb2.ErrorInfo(reason=reason, domain="a2a-protocol.org")
            status.details.add().Pack(info)
        if retry_after is not None:
            delay = error_details_pb2.RetryInfo()
            delay.retry_delay.FromSeconds(max(1, round(retry_after)))
            status.details.add().Pack(delay)
        rich = status_to_grpc(status)
        trailing = tuple(context.trailing_metadata() or ())
        context.set_trailing_metadata(trailing + tuple(rich.trailing_metadata))
        await context.abort(rich.code, rich.details)

    class _OwnAborts:
        """A servicer's ``abort_context``, answering our own errors with their status."""

        async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
            if isinstance(error, OwnError):
                code = getattr(grpc.StatusCode, error.wire.grpc)
                await abort(context, code, error.message, error.wire.reason, error.retry_after)
            else:
                await super().abort_context(error, context)  # type: ignore[misc]

    class Servicer(_OwnAborts, GrpcHandler):
        """The SDK's A2A 1.0 servicer; our own errors get their status here."""

    class CompatServicer(_OwnAborts, CompatGrpcHandler):
        """The SDK's A2A 0.3 servicer, with our own errors' statuses as :class:`Servicer`.

        The SDK's 0.3 servicer starts its message with the A2A error type (``TaskNotFoundError:
        Task not found``), which its 0.3 client reads back into that error; ours are no A2A
        types, so their message is theirs alone, as on 1.0 (the reason names them)."""
