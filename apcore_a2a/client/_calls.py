"""One A2A call through a2a-sdk's client transports, as the client makes every call.

The caller's credentials and headers go to the agent's own origin only (as gRPC metadata
to its host): an interface on another origin is called through an HTTP client without
them. With OpenTelemetry's API installed, each call runs in a CLIENT span named after the
A2A 1.0 method, with the draft OpenTelemetry A2A attributes, and sends its ``traceparent``.

A gRPC call takes the egress proxy the HTTP calls to its host would take, by httpx's rule
(``_proxies.proxy_for``): its channel dials the proxy and asks it for the agent
(``upstream/grpc_proxies.py``). grpcio's own rule (``grpc_proxy``, ``https_proxy``,
``http_proxy`` in lower case only, ``no_grpc_proxy``/``no_proxy`` but not ``NO_PROXY``, no
``ALL_PROXY``) sent an agent direct over one binding and through the proxy over the other,
and skipped without a word a proxy it cannot use (it speaks HTTP ``CONNECT`` to ``http://``
proxies only): such a proxy is refused instead.

Another origin's host names (``allow_other_origins=True``) are resolved once, every address
checked, and the connection made to the address checked. A card's URL on a name is judged
by what the name resolves to, not by the name: one that resolves to a link-local address
(the cloud metadata service: ``169.254.169.254``, ``fd00:ec2::254``, ``100.100.100.200``) or
to loopback (the caller's own host) leads further in than an agent that is not there
itself, as a literal address does (``_egress.inward``). Nothing resolves the name again to
connect, so an answer that changes between the check and the connection (DNS rebinding)
changes nothing: HTTP through :class:`CheckedAddresses` (the name still in ``Host`` and
SNI, the certificate verified for it), gRPC dialled at the checked addresses with the name
as its authority and TLS target name.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import urllib.request
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    MutableMapping,
    Sequence,
)
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client.client import ClientCallContext
from a2a.client.transports.base import ClientTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.rest_transport import CompatRestTransport
from a2a.types import a2a_pb2 as pb
from google.protobuf.message import Message as Proto

from apcore_a2a._addresses import IPAddress, address_class
from apcore_a2a._egress import (
    MAX_ADDRESSES,
    CheckedAddresses,
    RefusedAddress,
    Resolver,
    agents_class,
    inward,
    lookup,
)
from apcore_a2a._proxies import ProxyUnusable, proxy_for, trusted_context
from apcore_a2a.client import _shapes as shape
from apcore_a2a.client._asgi import CONNECT_TIMEOUT
from apcore_a2a.client._bounded import ACCEPT_ENCODING, MAX_ANSWER_BYTES
from apcore_a2a.client._translated import translated
from apcore_a2a.client._wire import HOOKS, Call, current
from apcore_a2a.client.card import Endpoint, origin_of, own_grpc_host
from apcore_a2a.client.errors import (
    A2AConnectionError,
    A2ADiscoveryError,
    CrossOriginEndpointError,
    InvalidAgentResponseError,
)
from apcore_a2a.upstream.grpc_proxies import through_proxy

_HTTP_TRANSPORTS: dict[tuple[str, str], Callable[..., ClientTransport]] = {
    ("JSONRPC", "1.0"): JsonRpcTransport,
    ("JSONRPC", "0.3"): CompatJsonRpcTransport,
    ("HTTP+JSON", "1.0"): RestTransport,
    ("HTTP+JSON", "0.3"): CompatRestTransport,
}
#: The transports answer GetExtendedAgentCard from the card they were given unless that
#: card says there is an extended one; the client always asks the agent.
_ASK_FOR_EXTENDED = pb.AgentCard(capabilities=pb.AgentCapabilities(extended_agent_card=True))


class Caller:
    """Makes the client's A2A calls: picks the SDK transport of the interface *endpoint*
    names, sends the headers the call needs, maps errors, resumes a dropped stream."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base: str,
        endpoint: Callable[[], Awaitable[Endpoint]],
        resolve: Resolver,
    ) -> None:
        self._http, self._base, self._endpoint = http, base, endpoint
        self._timeout = http.timeout.read  # the client's timeout (None: no bound)
        self._resolve, self._lookups = resolve, http.timeout.connect or CONNECT_TIMEOUT
        self._agent = agents_class(base)
        self._elsewhere: httpx.AsyncClient | None = None
        self._channels: dict[tuple[str, bool], Any] = {}

    async def aclose(self) -> None:
        """Close what the calls opened: gRPC channels, the other origins' HTTP client."""
        for channel in self._channels.values():
            await channel.close()
        if self._elsewhere is not None:
            await self._elsewhere.aclose()

    def _transport(self, to: Endpoint, pinned: str | None) -> ClientTransport:
        """The SDK transport to *to*; a gRPC channel to the checked addresses *pinned*
        when *to* is another host's."""
        if to.binding != "GRPC":
            http = self._http
            if origin_of(to.url) != origin_of(self._base):
                if self._elsewhere is None:
                    self._elsewhere = httpx.AsyncClient(
                        timeout=self._http.timeout,
                        headers={"Accept-Encoding": ACCEPT_ENCODING},
                        event_hooks=HOOKS,
                        transport=OtherOrigins(self._base, self._resolve, self._agent),
                        trust_env=False,  # the proxies are applied after the check
                    )
                http = self._elsewhere
            transport = _HTTP_TRANSPORTS[to.binding, to.version]
            return transport(http, _ASK_FOR_EXTENDED, to.url, is_shared_httpx=True)
        try:
            import grpc.aio
            from a2a.client.transports.grpc import GrpcTransport
            from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
        except ImportError:
            raise A2ADiscoveryError(
                "the agent offers gRPC only, which needs the grpc extra: "
                "pip install 'apcore-a2a[grpc]'"
            ) from None
        channel = self._channels.get((to.url, to.secure))
        if channel is None:
            # A host named like a gRPC resolver ("unix:PORT") is still a host to look up.
            target = pinned or "dns:///" + to.url
            # What the client reads of an answer on every binding (gRPC's own: 4 MiB).
            options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", MAX_ANSWER_BYTES)]
            # The proxy the HTTP calls to that host take, or none (see the module docstring).
            proxy = proxy_for(httpx.URL(("https://" if to.secure else "http://") + to.url))
            if proxy is None:
                options.append(("grpc.enable_http_proxy", 0))
            elif httpx.URL(proxy).scheme == "http":
                # The first checked address, as grpcio's mapper asked the proxy for it.
                server = pinned.split(":", 1)[1].split(",")[0] if pinned else to.url
                target, tunnel = through_proxy(proxy, server)
                options += tunnel
            else:  # no retry reaches it: told as unreachable
                reason = "gRPC calls go through http:// proxies only (HTTP CONNECT)"
                raise A2AConnectionError(str(ProxyUnusable(proxy, reason)))
            if pinned is not None or proxy is not None:  # whom the call and TLS are for
                options.append(("grpc.default_authority", to.url))
                if to.secure:
                    host = urlsplit("//" + to.url).hostname or ""
                    options.append(("grpc.ssl_target_name_override", host))
            channel = (
                grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options)
                if to.secure
                else grpc.aio.insecure_channel(target, options)
            )
            self._channels[to.url, to.secure] = channel
        grpc_transport = GrpcTransport if to.version == "1.0" else CompatGrpcTransport
        return grpc_transport(channel, _ASK_FOR_EXTENDED)

    async def _grpc_metadata(self) -> dict[str, str]:
        """The caller's headers and credentials (what *auth* adds first)."""
        request = httpx.Request("POST", self._base, headers=self._http.headers)
        if self._http.auth is not None:
            flow = self._http.auth.async_auth_flow(request)
            request = await anext(flow)
            await flow.aclose()
        # What httpx sets itself is no header of the caller's (gRPC reserves most of them).
        own = ("host", "accept", "accept-encoding", "connection", "user-agent", "content-length")
        return {k: v for k, v in request.headers.items() if k not in own}

    @contextlib.asynccontextmanager
    async def _sdk(
        self, method: str, request: Proto, call: Call, deadline: float | None
    ) -> AsyncIterator[tuple[Any, Callable[[Any], None]]]:
        """The SDK call for *method* (not yet awaited) in its span, and the span's callback.
        What it waits for before the SDK's call (a gRPC host's lookup, the credentials an
        ``httpx.Auth`` fetches) ends by *deadline* (the loop's clock; ``None``: none)."""
        to = await self._endpoint()
        call.binding, call.version = to.binding, to.version
        headers: dict[str, str] = {}
        if to.binding != "GRPC" and to.version == "1.0":  # the others set their A2A-Version
            headers["A2A-Version"] = "1.0"
        if method == "SubscribeToTask" and call.event_id is not None:
            headers["Last-Event-ID"] = call.event_id
        sdk_method = {
            "SendStreamingMessage": "send_message_streaming",
            "SubscribeToTask": "subscribe",
        }
        name = sdk_method.get(method) or re.sub(r"(?<!^)([A-Z])", r"_\1", method).lower()
        with _span(method, to, request, headers) as seen, translated(method, to.url):
            pinned = None
            async with asyncio.timeout_at(deadline):
                grpc = to.binding == "GRPC"
                if grpc and own_grpc_host(to, self._base):  # the caller's credentials
                    for key, value in (await self._grpc_metadata()).items():
                        headers.setdefault(key, value)  # the span's traceparent stays
                elif grpc and (to.url, to.secure) not in self._channels:
                    pinned = await self._grpc_addresses(to.url)
            # httpx has its own; a gRPC deadline would end a stream however lively (its
            # waits are bounded one by one in resumable()). What is left of the call's.
            timeout = None
            if to.binding == "GRPC" and method not in sdk_method and deadline is not None:
                timeout = max(deadline - asyncio.get_running_loop().time(), 0.001)
            context = ClientCallContext(service_parameters=headers, timeout=timeout)
            yield getattr(self._transport(to, pinned), name)(request, context=context), seen

    async def _grpc_addresses(self, target: str) -> str:
        """The checked addresses of another host's gRPC *target* (``host:port``) as the target
        gRPC dials (an ``ipv4:`` or ``ipv6:`` URI of the first ``MAX_ADDRESSES``, in the
        resolver's order), looked up within the connect timeout."""
        where = urlsplit("//" + target)
        host, port = where.hostname or "", where.port or 443
        within = asyncio.get_running_loop().time() + self._lookups
        try:
            found = await lookup(self._resolve, host, port, within)
        except httpx.TransportError as exc:
            raise A2AConnectionError(f"the gRPC host: {exc}") from None
        reason = refused(host, found, self._agent, self._base)
        if reason is not None:
            agent = str(origin_of(self._base))
            raise CrossOriginEndpointError(reason, url=target, agent_origin=agent)
        found = found[:MAX_ADDRESSES]
        if all(a.version == 4 for a in found):
            return "ipv4:" + ",".join(f"{a}:{port}" for a in found)
        # gRPC's address lists are of one family: IPv4 ones go IPv4-mapped (gRPC dials them
        # over IPv4 where IPv6 is off), so every checked address is tried, in the resolver's order.
        mapped = (a if a.version == 6 else ipaddress.IPv6Address(f"::ffff:{a}") for a in found)
        # A zone (fe80::1%eth0) as the URI gRPC percent-decodes carries it (RFC 6874).
        return "ipv6:" + ",".join(f"[{str(a).replace('%', '%25')}]:{port}" for a in mapped)

    async def call(self, method: str, request: Proto) -> tuple[Any, Any]:
        """Run one SDK call; return its result and the result as received (HTTP)."""
        call = Call(nothing_expected=method == "DeleteTaskPushNotificationConfig")
        loop = asyncio.get_running_loop()
        deadline = None if self._timeout is None else loop.time() + self._timeout
        async with self._sdk(method, request, call, deadline) as (pending, seen):
            # The whole answer within the timeout: httpx bounds each read, so an agent
            # trickling a byte at a time would hold the call forever.
            with current(call):
                async with asyncio.timeout_at(deadline):
                    result = await pending
            seen(result)
        return result, call.wire

    async def resumable(
        self,
        task_id: str | None,
        last_event_id: str | None,
        max_retries: int,
        within: float | None,
        first: pb.SendMessageRequest | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Events of *task_id* (or of the stream *first* opens) up to the final one, resumed
        and given up on *within* seconds as ``A2AClient.resubscribe`` says. Only this
        generator's own waits are bounded: the caller's work between events is not cut."""
        call = Call(event_id=last_event_id, stream=True)
        failures = 0
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within

        def until(wait: float | None = None) -> float | None:
            """When the next wait ends: after *wait* seconds, and by the deadline."""
            ends = [t for t in (deadline, wait and loop.time() + wait) if t is not None]
            return min(ends, default=None)

        def overdue() -> A2AConnectionError:
            stream = f"task {task_id}" if task_id is not None else method
            return A2AConnectionError(f"the stream of {stream} did not end within {within:g} s")

        while True:
            method = "SubscribeToTask" if first is None else "SendStreamingMessage"
            request = pb.SubscribeToTaskRequest(id=task_id) if first is None else first
            # A stream starts with the task (or a message; A2A 1.0.1 §3.1.6, §11.7): one
            # that ends before is no answer. A resumed one may have nothing left to replay.
            first_expected = call.event_id is None
            try:
                async with asyncio.timeout_at(until()):
                    await self._endpoint()  # the card, if it is not at hand
                async with (
                    self._sdk(method, request, call, until(self._timeout)) as (stream, seen),
                    contextlib.aclosing(stream),
                ):
                    # Each wait for the agent's next event (httpx bounds each read itself).
                    wait = self._timeout if call.binding == "GRPC" else None
                    while True:
                        with current(call):
                            try:
                                async with asyncio.timeout_at(until(wait)):
                                    item = await anext(stream)
                            except StopAsyncIteration:
                                if first_expected:
                                    raise InvalidAgentResponseError(
                                        f"the agent's stream ended before its first event "
                                        f"({method} answers with the task or a message first)"
                                    ) from None
                                return
                        seen(item)
                        event = shape.event(item, call.wire)
                        # An event holds exactly one member (A2A 1.0.1 §3.2.3, §4.3.3):
                        # unknown fields are ignored (§5.7), but an event of no member the
                        # client knows (what the SDK reads of one) is no event. Skipped, it
                        # was a gap in the stream no one saw; a 0.3 JSON-RPC event of no
                        # known kind is refused alike (``_wire.check_event_03``).
                        if event is None:
                            raise InvalidAgentResponseError(
                                f"agent sent a stream event with no member A2A {call.version} "
                                "defines (a task, message, status update or artifact update)"
                            )
                        # A repeat (an agent replaying the id it resumes from) is neither
                        # yielded nor progress: replayed forever, it would reset the retries.
                        if call.repeated:
                            continue
                        first_expected, failures = False, 0
                        shape.of_task(event, task_id, method)  # a stream is one task's
                        if task_id is None:
                            task_id = event["id"] if event["kind"] == "task" else event["taskId"]
                        yield event
                        if shape.is_final(event):
                            return
            except (A2AConnectionError, TimeoutError) as exc:
                if deadline is not None and loop.time() >= deadline:
                    raise overdue() from None
                if isinstance(exc, TimeoutError):
                    raise
                can_resume = call.event_id is not None and task_id is not None
                if not can_resume or exc.status_code is not None or failures >= max_retries:
                    if failures:
                        raise A2AConnectionError(
                            f"stream of task {task_id} lost; gave up after "
                            f"{failures} resume attempt(s): {exc}"
                        ) from None
                    raise
                first = None  # from now on: the task's events after the last id seen
                failures += 1
                pause = 0.25 * 2 ** (failures - 1)
                if deadline is not None and loop.time() + pause >= deadline:
                    raise overdue() from None
                await asyncio.sleep(pause)


def _answer_attributes(result: Any) -> dict[str, Any]:
    """Task, conversation and state of a result or stream event."""
    if isinstance(result, Proto) and "payload" in result.DESCRIPTOR.oneofs_by_name:
        result = getattr(result, result.WhichOneof("payload") or "", None)
    if not isinstance(result, Proto):
        return {}
    state = result.status.state if isinstance(result, pb.Task | pb.TaskStatusUpdateEvent) else 0
    # A state this A2A version does not define (a newer or hostile agent's) by its number.
    known = pb.TaskState.DESCRIPTOR.values_by_number.get(state)
    found = {
        "a2a.task.id": getattr(result, "task_id", "")
        or (isinstance(result, pb.Task) and result.id),
        "gen_ai.conversation.id": getattr(result, "context_id", ""),
        "a2a.task.state": state and (known.name if known is not None else str(state)),
    }
    return {k: v for k, v in found.items() if v}


@contextlib.contextmanager
def _span(
    method: str, to: Endpoint, request: Proto, headers: MutableMapping[str, str]
) -> Iterator[Callable[[Any], None]]:
    """The CLIENT span of one call; adds ``traceparent`` to *headers*; yields what to call
    with each result or stream event."""
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        yield lambda _result: None
        return
    where = urlsplit(to.url if "://" in to.url else "//" + to.url)  # gRPC: host:port
    message = request.message if isinstance(request, pb.SendMessageRequest) else None
    found = {
        "a2a.method.name": method,
        "a2a.protocol.version": to.version,
        "a2a.message.id": message and message.message_id,
        "a2a.task.id": (message and message.task_id)
        or getattr(request, "task_id", "")
        or getattr(request, "id", ""),
        "server.address": where.hostname,
        "server.port": where.hostname and (where.port or (443 if where.scheme == "https" else 80)),
    }
    # Not made current: a stream's span stays open while the caller runs between events.
    span = trace.get_tracer("apcore_a2a.client").start_span(
        method, kind=trace.SpanKind.CLIENT, attributes={k: v for k, v in found.items() if v}
    )
    propagate.inject(headers, context=trace.set_span_in_context(span))

    def seen(result: Any) -> None:
        if span.is_recording():
            span.set_attributes(_answer_attributes(result))

    try:
        yield seen
    except Exception as exc:
        code = getattr(exc, "code", None) or getattr(exc, "status_code", None)
        error = str(code) if code else type(exc).__name__
        span.set_attribute("error.type", error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        raise
    finally:
        span.end()


def refused(host: str, addresses: Sequence[IPAddress], agent: int, base: str) -> str | None:
    """Why another origin's *host* (resolved to *addresses*) is not followed from an agent
    of class *agent* (``_egress.inward``: any of them further in), or ``None``."""
    named = f"a URL on {host}"
    reasons = (inward(named, "resolves to a", a, address_class(a), base, agent) for a in addresses)
    return next((reason for reason in reasons if reason is not None), None)


class OtherOrigins(CheckedAddresses):
    """The transport of the client's calls to another origin (no credentials go there)."""

    def __init__(self, base: str, resolve: Resolver, agent: int) -> None:
        # The environment's proxies as httpx reads them, applied after the check.
        super().__init__(resolve, urllib.request.getproxies(), trusted_context())
        self._base, self._agent = base, agent

    async def refused(self, host: str, addresses: Sequence[IPAddress]) -> str | None:
        return refused(host, addresses, self._agent, self._base)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except RefusedAddress as exc:
            raise CrossOriginEndpointError(
                str(exc), url=str(request.url), agent_origin=str(origin_of(self._base))
            ) from None
        except ProxyUnusable as exc:  # no retry reaches it: told as unreachable, not a bug
            raise A2AConnectionError(str(exc)) from None
