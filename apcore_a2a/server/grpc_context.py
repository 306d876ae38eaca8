"""The gRPC call context builder: the SDK's, plus the call record of what the interceptor
admitted (``grpc.py``), the apcore identity, and the call's text metadata.

The interceptor admits a call asynchronously (authentication may fetch keys), and the SDK
builds the call's context synchronously, from its servicer context alone. So the
interceptor files what it admitted under that servicer context (:meth:`admitting`) for as
long as the call runs, its end included (a dropped stream's cancel is built there), and
the builder reads it back: no state beside the call, none on grpc's objects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc.aio
from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder

from apcore_a2a.auth.authenticator import metadata_headers
from apcore_a2a.edge.call import CallRecord, attach
from apcore_a2a.execution.identity import Caller
from apcore_a2a.streams.tap import Answer

if TYPE_CHECKING:
    from apcore import Identity


@dataclass(frozen=True, slots=True)
class Admitted:
    """What the interceptor admitted a call as: the protocol version its service speaks,
    its A2A 1.0 method, the caller key, the call's answer, the caller's identity, and who
    an anonymous caller is to the stores (``CallerKeys.anonymous``)."""

    version: str
    method: str
    caller: str
    answer: Answer
    identity: Identity | None
    anonymous: User | None = None
    #: the call's request message (what the caller said, which an error may quote back)
    request: Any = None


class GrpcCallContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The SDK's gRPC builder plus, as over HTTP, the call record of what the interceptor
    admitted (a record of its own for each context, as HTTP's builder makes), the apcore
    identity and the text metadata as ``state['headers']``. One builder serves both A2A
    services and their interceptor."""

    def __init__(self) -> None:
        # id() of the servicer context: grpc's object is kept alive by the call that filed
        # it, and taken out when that call ends, so no id is reused while it is here
        self._admitted: dict[int, Admitted] = {}

    @contextlib.contextmanager
    def admitting(self, context: grpc.aio.ServicerContext, call: Admitted) -> Iterator[None]:
        """Build *context*'s call contexts from *call* until the block ends."""
        self._admitted[id(context)] = call
        try:
            yield
        finally:
            del self._admitted[id(context)]

    def request_of(self, context: grpc.aio.ServicerContext) -> Any:
        """The request message of the admitted call *context* serves (else ``None``)."""
        call = self._admitted.get(id(context))
        return None if call is None else call.request

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        call_context: ServerCallContext = super().build(context)
        call_context.state["headers"] = metadata_headers(context.invocation_metadata())
        call = self._admitted.get(id(context))
        if call is not None:
            record = CallRecord("grpc", call.version, call.method, call.caller, answer=call.answer)
            attach(call_context, record)
        return call_context

    def build_user(self, context: grpc.aio.ServicerContext) -> User:
        call = self._admitted.get(id(context))
        if call is None:
            return UnauthenticatedUser()
        if call.identity is not None:
            return Caller(call.identity)
        return call.anonymous or UnauthenticatedUser()
