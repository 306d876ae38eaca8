"""gRPC binding: the same ``DefaultRequestHandler`` served over ``grpc.aio``.

One port carries ``lf.a2a.v1.A2AService`` (1.0, the SDK's ``GrpcHandler``) and
``a2a.v1.A2AService`` (0.3, ``CompatGrpcHandler``), with the HTTP edge's rules (auth,
version, shape, stream slots, a 0.3 message's role: ``upstream/wire_values.py``) on the
same call record, and ``grpc.health.v1.Health`` (``ops/grpc_health.py``); stream slots,
cancel-on-drop and requests that do not decode on every service: ``grpc_streams.py``.
Without the ``grpc`` extra, importing this module raises an ``ImportError`` that says so.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from a2a.utils.errors import A2AError, InternalError, InvalidRequestError

from apcore_a2a import errors
from apcore_a2a.auth.authenticator import Gate, metadata_headers
from apcore_a2a.auth.middleware import identify_task
from apcore_a2a.classify import version_error
from apcore_a2a.server.caller_keys import CallerKeys
from apcore_a2a.server.limits import StreamLimiter
from apcore_a2a.shape import Shape, ShapeError, check_message
from apcore_a2a.streams.scrub import said_in_call, scrub_exception
from apcore_a2a.streams.tap import Answer
from apcore_a2a.upstream.file_bytes import (
    is_python_client,
    proto_request_to_sdk,
    proto_response_to_wire,
)
from apcore_a2a.upstream.wire_values import role03_error

GRPC_EXTRA_HINT = 'gRPC support needs the "grpc" extra: pip install "apcore-a2a[grpc]"'

try:
    import grpc
    import grpc.aio
    from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    from apcore_a2a.ops.grpc_health import HEALTH_SERVICE, add_health_service
    from apcore_a2a.server.grpc_context import Admitted, GrpcCallContextBuilder
    from apcore_a2a.server.grpc_deadlines import RequestBounds, connection_options
    from apcore_a2a.server.grpc_reflection import enable_reflection
    from apcore_a2a.server.grpc_streams import (
        UNDECODABLE,
        UNDECODABLE_TEXT,
        CallEnds,
        followed,
        one,
        other_service,
        same_kind,
        stream_slot,
        written,
    )
    from apcore_a2a.upstream import grpc_metadata_logs
    from apcore_a2a.upstream.error_answers import CompatServicer, Servicer
    from apcore_a2a.upstream.grpc03_names import Grpc03Names
    from apcore_a2a.upstream.request_heads import HEAD_LIMIT  # metadata: one HTTP head's bound
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without grpc
    raise ImportError(GRPC_EXTRA_HINT) from exc

if TYPE_CHECKING:
    from a2a.server.request_handlers import RequestHandler
    from apcore import Identity

    from apcore_a2a.auth import Authenticator
    from apcore_a2a.ops.operations import Operations
    from apcore_a2a.settings import Settings
    from apcore_a2a.streams.answers import StreamDrops


logger = logging.getLogger("apcore_a2a.grpc")

#: Full names of the two A2A services this server hosts.
SERVICE_V1: str = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
SERVICE_V0_3: str = a2a_v0_3_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name

#: 0.3 gRPC method names that differ from their 1.0 name.
_V03_NAMES = {"TaskSubscription": "SubscribeToTask", "GetAgentCard": "GetExtendedAgentCard"}
_V03_NAMES["ListTaskPushNotificationConfig"] = "ListTaskPushNotificationConfigs"

_Abort = Callable[[A2AError, grpc.aio.ServicerContext], Awaitable[None]]


def _a2a_name(method: str) -> str:
    """The A2A 1.0 name of a gRPC *method* (``/a2a.v1.A2AService/GetAgentCard``: 0.3's)."""
    name = method.rsplit("/", 1)[-1]
    return _V03_NAMES.get(name, name)


def _bind_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def grpc_address(settings: Settings) -> str:
    """The ``host:port`` advertised on the card: the public URL's host (no scheme)."""
    host = urlsplit(settings.public_url()).hostname or "127.0.0.1"
    return f"{_bind_host(host)}:{settings.grpc_port}"


def _read_tls(cert: str | None, key: str | None) -> tuple[bytes, bytes] | None:
    if not cert and not key:
        return None
    if not cert or not key:
        raise ValueError("grpc_tls_cert and grpc_tls_key must be given together")
    try:
        return Path(key).read_bytes(), Path(cert).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read gRPC TLS file {exc.filename}: {exc.strerror}") from None


class _ScrubbedAnswers:
    """A servicer whose error answers are sanitized and bounded as over HTTP
    (:func:`~apcore_a2a.streams.scrub.scrub_exception`): no path, no traceback, a message
    of at most 500 characters (one echoing a long request value would otherwise overflow
    the client's metadata limit and reach it as ``RESOURCE_EXHAUSTED``)."""

    #: the calls the interceptor admitted (their requests are what a caller said)
    calls: GrpcCallContextBuilder | None = None

    async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
        request = None if self.calls is None else self.calls.request_of(context)
        said = said_in_call(context.invocation_metadata(), request)
        await super().abort_context(scrub_exception(error, said), context)  # type: ignore[misc]


class _V1Servicer(_ScrubbedAnswers, Servicer):
    """The 1.0 servicer, its answers scrubbed."""


class _V03Servicer(_ScrubbedAnswers, Grpc03Names, CompatServicer):
    """The 0.3 servicer, its answers scrubbed, malformed names refused in full."""


class _A2AInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Admits A2A calls (auth, version, the request's shape, stream slots), counts and
    traces them, and answers unexpected exceptions INTERNAL (grpc's UNKNOWN would carry the
    exception text)."""

    def __init__(
        self,
        aborts: dict[str, _Abort],
        gate: Gate | None,
        streams: StreamLimiter,
        operations: Operations | None,
        shape: Shape,
        drops: StreamDrops | None = None,
        requests: RequestBounds | None = None,
        caller_keys: CallerKeys | None = None,
        builder: GrpcCallContextBuilder | None = None,
        ends: CallEnds | None = None,
    ) -> None:
        self._aborts = aborts
        self._ends = ends or CallEnds()  # the streams a stop ends (grpc_streams.py)
        #: the servicers' context builder, told what each call was admitted as
        self._builder = builder or GrpcCallContextBuilder()
        self._keys = caller_keys or CallerKeys()  # quota keys (caller_keys.py)
        self._requests = requests or RequestBounds(None, 0)  # grpc_deadlines.py
        self._drops = drops
        self._shape = shape
        self._gate = gate
        self._streams = streams
        self._unadmitted: set[str] = set()  # methods refused (and logged) already
        self._metrics = operations.metrics if operations is not None else None
        self._spans = operations.module_spans if operations is not None else None

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[grpc.RpcMethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        if (handler := await continuation(details)) is None:
            return None
        method: str = details.method
        abort = self._aborts.get(method.split("/")[1] if method.count("/") == 2 else "")
        if abort is None:  # health, reflection: no credentials, but a stream takes a slot
            service = other_service(handler, self._streams, self._keys, self._ends)
            return self._requests.timed(service)
        streaming = handler.unary_stream is not None
        if handler.unary_unary is None and not streaming:
            # Only unary requests are admitted below (auth, version, shape, slots): a
            # client-streaming A2A method would run unchecked, so it is refused instead.
            return self._refused(handler, method)
        behavior = handler.unary_stream or handler.unary_unary
        served = same_kind(handler, self._wrap(behavior, method, abort, streaming))
        return self._requests.timed(served)

    def _refused(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        """A handler of *handler*'s kind that answers every call ``UNIMPLEMENTED``."""
        if method not in self._unadmitted:  # the A2A services' methods: a bounded set
            self._unadmitted.add(method)
            logger.error(
                "gRPC %s streams its requests, which this edge cannot admit; refused", method
            )

        async def refuse(_requests: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not served")

        return same_kind(handler, refuse)

    @contextlib.contextmanager
    def _observed(
        self, method: str, request: Any, context: grpc.aio.ServicerContext, answer: Answer
    ) -> Iterator[None]:
        """Count the call, and trace it: its span reads what *answer* noted."""
        if self._metrics is not None:
            self._metrics.count_request()
        if self._spans is None:
            yield
            return
        from apcore_a2a.ops.telemetry import rpc_span

        with rpc_span(self._spans, method, _a2a_name(method), request, context, answer):
            yield

    async def _identify(
        self, method: str, headers: dict[str, str], context: grpc.aio.ServicerContext
    ) -> Identity | None:
        """Identify and admit the caller to *method* with the HTTP rules; raises the refusal."""
        if self._gate is None:
            return None
        try:
            identity = await self._gate.identify(headers)
            self._gate.admit(identity, anonymous_ok=self._gate.anonymous_ok(method))
        except errors.UnauthenticatedError:
            challenges = self._gate.challenges
            context.set_trailing_metadata(tuple(("www-authenticate", v) for v in challenges))
            raise
        return identity

    def _wrap(
        self, behavior: Callable[..., Any], method: str, abort: _Abort, streaming: bool
    ) -> Callable[[Any, grpc.aio.ServicerContext], Any]:
        legacy = method.startswith(f"/{SERVICE_V0_3}/")
        spoken = "0.3" if legacy else "1.0"
        a2a_method = _a2a_name(method)

        async def serve(
            request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncGenerator[Any, None]:
            self._ends.follow(answer := Answer())  # what the call answers, for a stop's end
            read = None if request is UNDECODABLE else request  # what the span may read
            with self._observed(method, read, context, answer):
                try:
                    headers = metadata_headers(context.invocation_metadata())
                    identity = await self._identify(a2a_method, headers, context)
                    if request is UNDECODABLE:
                        raise InvalidRequestError(message=UNDECODABLE_TEXT)
                    # Ignored, as the SDK's JSON parsers ignore them: kept, they would be
                    # stored and answered back, outside every shape limit.
                    request.DiscardUnknownFields()
                    try:  # the shape, then the version: HTTP's order
                        check_message(request, self._shape)
                    except ShapeError as exc:
                        raise exc.refusal() from None
                    wrong: A2AError | None = version_error(
                        headers.get("a2a-version", "").strip(), spoken
                    )
                    wrong = wrong or (role03_error(request) if legacy else None)
                    if wrong is not None:
                        raise wrong
                    caller = await self._keys.of_call(identity, context)
                    anonymous = None if identity else self._keys.anonymous(caller)
                    admitted = Admitted(
                        spoken, a2a_method, caller, answer, identity, anonymous, request
                    )
                    identify_task(identity)  # current_identity(), as AuthMiddleware sets it
                    python = legacy and is_python_client(headers.get("user-agent"))
                    if legacy:
                        proto_request_to_sdk(request, python_client=python)
                    held: contextlib.AbstractAsyncContextManager[None] = contextlib.nullcontext()
                    if streaming:
                        held = stream_slot(self._streams, caller, context, a2a=True)
                    async with held:
                        with self._builder.admitting(context, admitted):
                            answers = behavior(request, context)
                            if streaming and self._drops is not None:
                                rebuilt = functools.partial(self._builder.build, context)
                                answers = followed(answers, answer, self._drops, rebuilt)
                            items = answers if streaming else one(answers)
                            async with contextlib.aclosing(items):
                                async for item in items:
                                    if legacy:
                                        proto_response_to_wire(item, python_client=python)
                                    yield item
                except grpc.aio.AbortError:
                    raise
                except A2AError as exc:  # a refusal of ours (the servicer answers its own)
                    await abort(exc, context)
                except Exception:
                    logger.exception("unexpected error in gRPC %s", method)
                    await abort(InternalError(), context)

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            (answer,) = [item async for item in serve(request, context)]
            return answer

        # the stream slot, the drop, the SDK's stream: closed in order inside the call
        return written(serve, self._ends) if streaming else unary


class GrpcServer:
    """A ``grpc.aio`` server for an SDK request handler, started and stopped by the app.

    Example::

        server = GrpcServer(handler, Settings(grpc_port=50051))
        await server.start()
        ...
        await server.stop()

    *authenticator* (an :class:`~apcore_a2a.auth.Authenticator`) turns on authentication
    with the same rules as HTTP: ``settings.require_auth`` decides whether anonymous calls
    pass, bad credentials are always rejected, and the extended card always needs them.
    """

    def __init__(
        self,
        handler: RequestHandler,
        settings: Settings,
        *,
        authenticator: Authenticator | None = None,
        streams: StreamLimiter | None = None,
        operations: Operations | None = None,
        drops: StreamDrops | None = None,
        caller_keys: CallerKeys | None = None,
    ) -> None:
        port = settings.grpc_port
        if port is None or not 0 < port < 65536:
            raise ValueError(f"grpc_port must be between 1 and 65535, got {port!r}")
        self.settings = settings
        self.handler = handler
        self.authenticator = authenticator
        #: shared with the HTTP request guard, so SSE and gRPC streams count together; on
        #: its own, the server still holds the settings' stream limits
        self.streams = streams or StreamLimiter(
            settings.max_streams, settings.max_streams_per_caller
        )
        #: counts and traces calls, and feeds grpc.health.v1 (``ops.Operations``)
        self.operations = operations
        #: cancel_on_disconnect, shared with the HTTP answer side (``streams/answers.py``)
        self.drops = drops
        #: how callers are keyed for quotas, as on the HTTP port (``caller_keys.py``)
        self.caller_keys = caller_keys or CallerKeys.of(settings)
        self._health: Callable[[], Awaitable[None]] | None = None  # its stop
        self.bind_address = f"{_bind_host(settings.host or '0.0.0.0')}:{port}"
        self.address = grpc_address(settings)
        self._tls = _read_tls(settings.grpc_tls_cert, settings.grpc_tls_key)
        self._server: grpc.aio.Server | None = None
        self._stopping: grpc.aio.Server | None = None  # once stop() has begun
        self.ends = CallEnds()  #: the A2A streams open, which the stop's drain ends

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        """Bind the port and start serving; raises ``OSError`` if the port is taken."""
        if self._server is not None:
            return
        s = self.settings
        builder = GrpcCallContextBuilder()
        v1 = _V1Servicer(self.handler, context_builder=builder)
        v03 = _V03Servicer(self.handler, context_builder=builder)
        v1.calls = v03.calls = builder
        interceptor = _A2AInterceptor(
            {SERVICE_V1: v1.abort_context, SERVICE_V0_3: v03.abort_context},
            Gate(
                self.authenticator,
                roles=s.required_roles,
                scopes=s.required_scopes,
                require_auth=s.require_auth,
            )
            if self.authenticator
            else None,
            self.streams,
            self.operations,
            Shape.of(s),
            self.drops,
            RequestBounds(s.body_timeout, s.grpc_max_pending_requests),
            self.caller_keys,
            builder,
            self.ends,
        )
        server = grpc.aio.server(
            interceptors=[interceptor],
            options=[
                ("grpc.max_receive_message_length", s.max_body_bytes),
                # grpc refuses metadata between its soft limit (8 KiB) and its hard one at
                # random: a caller with a 10 KiB token failed one call in two. One limit,
                # grpc's hard one (h11's for a request head): always served below, never above.
                ("grpc.max_metadata_size", HEAD_LIMIT),
                ("grpc.absolute_max_metadata_size", HEAD_LIMIT),
                # Linux grpc sets SO_REUSEPORT by default, which would let a second agent
                # "bind" a port that is already serving and split traffic with it; only
                # the worker processes of one agent (workers=N) share it on purpose.
                ("grpc.so_reuseport", 1 if s.workers > 1 else 0),
                # the handshake, idle and keepalive bounds (grpc_deadlines.py)
                *connection_options(s),
            ],
        )
        try:  # first: a port taken starts nothing (the health probe of the store)
            if self._tls is not None:
                server.add_secure_port(self.bind_address, grpc.ssl_server_credentials([self._tls]))
            else:
                server.add_insecure_port(self.bind_address)
        except RuntimeError as exc:
            raise OSError(f"cannot listen for gRPC on {self.bind_address}: {exc}") from None
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(v1, server)  # type: ignore[no-untyped-call]
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(v03, server)  # type: ignore[no-untyped-call]
        served = (SERVICE_V1, SERVICE_V0_3)
        if self.operations is not None:
            problem = self.operations.problem
            self._health = add_health_service(server, problem, served, self.ends.also)
        if s.grpc_reflection:
            health = (HEALTH_SERVICE,) if self._health is not None else ()
            try:
                enable_reflection(server, (*served, *health))
            except ImportError as exc:  # pragma: no cover - grpcio-reflection is in the extra
                raise ImportError(GRPC_EXTRA_HINT) from exc
        await grpc_metadata_logs.starting(server.start())
        self._server = server
        logger.info(
            "Serving A2A over gRPC%s at %s", " (TLS)" if self._tls else "", self.bind_address
        )

    async def stop(self, grace: float | None = None) -> None:
        """Stop accepting calls, let running ones finish for *grace* seconds (by default
        ``settings.shutdown_timeout``), then cancel. Called again during that stop, cancel
        them *grace* seconds from now if that is sooner (grpc's own rule)."""
        server, self._server = self._server, None
        if server is None:
            if self._stopping is not None:
                await self._stopping.stop(grace)
            return
        self._stopping = server
        going, self._health = self._health, None
        if going is not None:
            await going()
        try:
            await server.stop(self.settings.shutdown_timeout if grace is None else grace)
        finally:
            grpc_metadata_logs.detach()
