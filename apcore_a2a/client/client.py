"""``A2AClient``: call any A2A agent (protocol 1.0 or 0.3) with plain dicts.

a2a-sdk's client transports send each call (``_calls``); ``_shapes`` turns the caller's
values into their requests and their results into the documented dicts.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict

from apcore_a2a._egress import Resolver, system_lookup
from apcore_a2a._proxies import (
    KEPT,
    ProxyUnusable,
    proxy_for,
    proxy_transport,
    trusted_context,
)
from apcore_a2a.client import _shapes as shape
from apcore_a2a.client._asgi import CONNECT_TIMEOUT, ASGIApp, DirectTransport
from apcore_a2a.client._bounded import (
    ACCEPT_ENCODING,
    MAX_ANSWER_BYTES,
    get_at_most,
    parse_json,
)
from apcore_a2a.client._calls import Caller
from apcore_a2a.client._shapes import MessageInput
from apcore_a2a.client._translated import alone_after_events, leaves_alone
from apcore_a2a.client._wire import HOOKS, is_json, refused
from apcore_a2a.client.card import (
    AgentCardFetcher,
    CardKeys,
    CardVerifier,
    Endpoint,
    Protocol,
    extension,
    select_endpoint,
)
from apcore_a2a.client.errors import (
    A2AClientError,
    A2ADiscoveryError,
    InvalidAgentResponseError,
    UnsupportedOperationError,
)

#: The card extension of an apcore-a2a agent that serves ``GET /push/status/{taskId}``.
PUSH_STATUS_EXTENSION = "urn:apcore:a2a:push-status:v1"


class A2AClient:
    """An async client for one A2A agent (docs/client.md has the whole contract).

    The card at ``url`` decides the binding (JSON-RPC, else HTTP+JSON, else gRPC) and, with
    ``protocol="auto"``, the version (1.0 when offered, else 0.3). ``auth`` is a bearer
    token, an ``httpx.Auth`` or a ``(user, password)`` pair. ``app=`` calls an ASGI app in
    this process, without a socket. Interface URLs on another origin than ``url``'s are
    refused unless ``allow_other_origins=True`` and never get the credentials; their host
    names are looked up by ``resolver`` (``resolve(host, port) -> addresses``; default: the
    system's), checked, and connected to at the addresses checked.
    ``verify_card=True`` (or ``card_keys``) requires a valid card signature. ``timeout``
    bounds each request in seconds; ``None`` waits as long as the agent takes (connecting
    gives up after :data:`CONNECT_TIMEOUT` s). Results are plain dicts in one shape whatever
    the wire version; errors are :class:`A2AClientError` subclasses.

    Example::

        async with A2AClient("http://127.0.0.1:8000") as client:
            task = await client.send_message("hello", skill_id="text.echo")
            print(task["status"]["state"], task["artifacts"][0]["parts"][0]["text"])
    """

    def __init__(
        self,
        url: str,
        *,
        auth: str | httpx.Auth | tuple[str, str] | None = None,
        timeout: float | None = None,
        card_ttl: float = 300.0,
        protocol: Protocol = "auto",
        headers: Mapping[str, str] | None = None,
        app: ASGIApp | None = None,
        lifespan: bool = True,
        allow_other_origins: bool = False,
        verify_card: bool = False,
        card_keys: CardKeys | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self._base, in_url = shape.normalize_url(url)
        if in_url is not None:
            if auth is not None:
                raise ValueError("credentials both in the URL and in auth: pass one")
            auth = in_url  # Basic auth, as httpx reads a URL's, but for every call
        self._allow_other_origins = allow_other_origins
        if protocol not in ("auto", "1.0", "0.3"):
            raise ValueError(f"protocol must be 'auto', '1.0' or '0.3', got {protocol!r}")
        self._protocol: Protocol = protocol
        self._timeout = shape.positive(timeout)
        default_headers = {"Accept-Encoding": ACCEPT_ENCODING} | {
            name: shape.header_value(value, f"header {name!r}")
            for name, value in (headers or {}).items()
        }
        if isinstance(auth, str | tuple) and any(
            n.lower() == "authorization" for n in headers or {}
        ):
            # an agent refuses a call with two Authorization headers (docs/auth.md)
            raise ValueError("credentials both in the Authorization header and in auth: pass one")
        if isinstance(auth, str):
            token = shape.header_value(auth, "the bearer token (auth)")
            default_headers["Authorization"], auth = f"Bearer {token}", None
        self._direct = DirectTransport(app, lifespan) if app is not None else None
        tls = trusted_context()  # one for the transport and the proxy mounts alike
        try:
            transport = _to_agent(self._base, tls) if self._direct is None else self._direct
        except httpx.InvalidURL as exc:  # "[::1]" in NO_PROXY: httpx reads it as a URL
            raise ValueError(
                "the environment's proxy settings (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, "
                f"NO_PROXY) cannot be read by httpx: {exc}"
            ) from None
        except ProxyUnusable as exc:  # the proxy every call of this client would go through
            raise ValueError(
                "the environment's proxy settings (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) "
                f"cannot be used: {exc.reason}"
            ) from None
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=timeout or CONNECT_TIMEOUT),
            headers=default_headers,
            auth=auth,  # a (user, password) pair: httpx's basic auth
            transport=transport,
            event_hooks=HOOKS,
            verify=tls,  # for the environment's proxy mounts
        )
        verifying = verify_card or card_keys is not None
        self._verifier = CardVerifier(self._http, self._base, card_keys) if verifying else None
        verify = self._verifier.verify if self._verifier is not None else None
        self._cards = AgentCardFetcher(self._http, self._base, ttl=card_ttl, verify=verify)
        self._pinned: Endpoint | None = None
        self._calls = Caller(self._http, self._base, self._endpoint, resolver or system_lookup)
        self._closed = False

    @property
    def url(self) -> str:
        """The agent's base URL, without a trailing slash."""
        return self._base

    @property
    def protocol(self) -> Protocol:
        """The configured protocol: ``"auto"``, ``"1.0"`` or ``"0.3"``."""
        return self._protocol

    # -- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> A2AClient:
        await self._ensure_open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client and gRPC channels (and stop an in-process app we started)."""
        if self._closed:
            return
        self._closed = True
        await self._http.aclose()
        await self._calls.aclose()

    async def _ensure_open(self) -> None:
        if self._closed:
            raise A2AClientError("the client is closed")
        if self._direct is not None:
            await self._direct.start(self._timeout or CONNECT_TIMEOUT)

    # -- discovery ---------------------------------------------------------------------
    @leaves_alone
    async def discover(self, *, refresh: bool = False) -> dict[str, Any]:
        """Return the agent card (cached for ``card_ttl`` seconds) as served."""
        await self._ensure_open()
        return await self._cards.fetch(refresh=refresh)

    async def agent_card(self) -> dict[str, Any]:
        """Same as :meth:`discover`."""
        return await self.discover()

    async def _card(self) -> dict[str, Any] | None:
        """The (cached) card; ``None`` when there is none and a pinned version does without."""
        try:
            return await self._cards.fetch()
        except A2ADiscoveryError:
            if self._protocol == "auto" or self._verifier is not None:
                raise  # asked to verify: no card (or a bad one) is never worked around
            return None

    async def _endpoint(self) -> Endpoint:
        """Where a call goes: chosen from the (cached) card, once when the protocol is pinned."""
        await self._ensure_open()
        if self._pinned is not None:
            return self._pinned
        endpoint = select_endpoint(
            await self._card(),
            self._base,
            self._protocol,
            allow_other_origins=self._allow_other_origins,
            direct=self._direct is not None,
        )
        if self._protocol != "auto":
            self._pinned = endpoint
        return endpoint

    # -- messages ----------------------------------------------------------------------
    @leaves_alone
    async def send_message(
        self,
        message: MessageInput,
        *,
        metadata: Mapping[str, Any] | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
        return_immediately: bool = False,
        skill_id: str | None = None,
    ) -> dict[str, Any]:
        """Send a message; return the resulting task (or the agent's reply message).

        ``message``: a ``str`` (text part), ``bytes`` (file part), a mapping without
        ``parts`` (data part), a list of parts, or a message mapping. ``skill_id`` goes in
        ``message.metadata.skillId``. The call waits for a terminal or interrupted state
        unless ``return_immediately=True``.
        """
        request = shape.send_request(
            message, metadata, context_id, task_id, skill_id, return_immediately
        )
        result, wire = await self._calls.call("SendMessage", request)
        event = shape.event(result, wire)
        if event is None or event["kind"] not in ("task", "message"):
            what = "nothing" if event is None else f"a {event['kind']} event"
            raise InvalidAgentResponseError(
                f"agent answered SendMessage with {what}, not a task or a message"
            )
        return shape.of_task(event, request.message.task_id or None, "SendMessage")

    def stream_message(
        self,
        message: MessageInput,
        *,
        metadata: Mapping[str, Any] | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
        skill_id: str | None = None,
        max_retries: int = 3,
        timeout: float | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Send a message and iterate over the task's events as they happen.

        The iterator ends after a final event (terminal or interrupted state, or a reply
        message) or when the agent closes the stream. A dropped connection is resumed, and
        *timeout* bounds the whole stream, as :meth:`resubscribe` says.
        """
        bounds = shape.stream_bounds(max_retries, timeout)
        request = shape.send_request(message, metadata, context_id, task_id, skill_id, False)
        # A follow-up's stream is its task's (A2A 1.0.1 §3.4.2), as is any stream after
        # its first event.
        following = request.message.task_id or None
        return alone_after_events(self._calls.resumable(following, None, *bounds, request))

    # -- tasks -------------------------------------------------------------------------
    @leaves_alone
    async def get_task(self, task_id: str, history_length: int | None = None) -> dict[str, Any]:
        """Return the task with ``task_id`` (its last ``history_length`` messages, if set)."""
        request = pb.GetTaskRequest(id=shape.require_id(task_id))
        if history_length is not None:
            if history_length < 0:
                raise ValueError("history_length must be >= 0")
            request.history_length = history_length
        result = shape.task((await self._calls.call("GetTask", request))[0])
        return shape.of_task(result, task_id, "GetTask")

    @leaves_alone
    async def cancel_task(self, task_id: str) -> dict[str, Any]:
        """Ask the agent to cancel the task; return the task as the agent reports it."""
        request = pb.CancelTaskRequest(id=shape.require_id(task_id))
        result = shape.task((await self._calls.call("CancelTask", request))[0])
        return shape.of_task(result, task_id, "CancelTask")

    @leaves_alone
    async def list_tasks(
        self,
        context_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        *,
        status: str | None = None,
        include_artifacts: bool = False,
    ) -> dict[str, Any]:
        """Return one page of the caller's tasks, newest first: ``{tasks, nextCursor, totalSize}``.

        ``nextCursor`` (``None`` on the last page) is the next call's ``cursor``. A2A 0.3 has
        no task listing: on a 0.3 agent this raises :class:`UnsupportedOperationError`.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be a positive integer")
        if (await self._endpoint()).version != "1.0":
            raise UnsupportedOperationError(
                "listing tasks is not part of A2A 0.3 (the protocol spoken to this agent)"
            )
        request = pb.ListTasksRequest(
            context_id=context_id or "",
            page_size=limit,
            page_token=cursor or "",
            include_artifacts=include_artifacts,
        )
        if status:
            name = status.upper().replace("-", "_").removeprefix("TASK_STATE_")
            request.status = pb.TaskState.Value("TASK_STATE_" + name)
        page, _wire = await self._calls.call("ListTasks", request)
        return {
            "tasks": [shape.task(t) for t in page.tasks],
            "nextCursor": page.next_page_token or None,
            "totalSize": page.total_size or None,
        }

    def resubscribe(
        self,
        task_id: str,
        *,
        last_event_id: str | None = None,
        max_retries: int = 3,
        timeout: float | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Iterate over a running task's events: first the task as it is now, then updates.

        With *last_event_id* (an SSE id of an earlier subscription), the agent replays the
        events after it instead. When the connection drops and the agent sent event ids, the
        iterator reconnects from the last id seen (nothing lost or repeated), at most
        *max_retries* times in a row (0.25, 0.5, 1 s ... apart), then raises
        :class:`A2AConnectionError`. *timeout* (seconds, ``None``: none) bounds the whole
        stream, resumes included, however lively the agent: past it the connection is
        closed and :class:`A2AConnectionError` raised.
        """
        bounds = shape.stream_bounds(max_retries, timeout)
        task_id = shape.require_id(task_id)
        if last_event_id is not None:
            shape.header_value(last_event_id, "last_event_id")  # it goes as Last-Event-ID
        return alone_after_events(self._calls.resumable(task_id, last_event_id, *bounds))

    # -- push notification configs -----------------------------------------------------
    @leaves_alone
    async def set_push_config(
        self, task_id: str, config: str | Mapping[str, Any]
    ) -> dict[str, Any]:
        """Register a push endpoint for a task: a URL or ``{url, id?, token?, authentication?}``."""
        request = shape.push_config_request(shape.require_id(task_id), config)
        result, _wire = await self._calls.call("CreateTaskPushNotificationConfig", request)
        return shape.push_config(result)

    @leaves_alone
    async def get_push_config(self, task_id: str, config_id: str) -> dict[str, Any]:
        """Return one push config of a task."""
        request = pb.GetTaskPushNotificationConfigRequest(
            task_id=shape.require_id(task_id), id=shape.require_id(config_id, "config_id")
        )
        result, _wire = await self._calls.call("GetTaskPushNotificationConfig", request)
        return shape.push_config(result)

    @leaves_alone
    async def list_push_configs(self, task_id: str) -> list[dict[str, Any]]:
        """Return every push config of a task."""
        request = pb.ListTaskPushNotificationConfigsRequest(task_id=shape.require_id(task_id))
        result, _wire = await self._calls.call("ListTaskPushNotificationConfigs", request)
        return [shape.push_config(c) for c in result.configs]

    @leaves_alone
    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Delete one push config of a task."""
        request = pb.DeleteTaskPushNotificationConfigRequest(
            task_id=shape.require_id(task_id), id=shape.require_id(config_id, "config_id")
        )
        await self._calls.call("DeleteTaskPushNotificationConfig", request)

    @leaves_alone
    async def push_status(self, task_id: str) -> dict[str, Any] | None:
        """The delivery status of the caller's push configs of a task, from an apcore-a2a
        agent's ``GET /push/status/{taskId}`` (not part of A2A, whose configs carry none):
        ``{"taskId", "configs": [{"id", "url", "status": "active" | "failed",
        "statusReason": str | None}]}``. ``None``, without a request, from an agent whose
        card does not declare it (:data:`PUSH_STATUS_EXTENSION`: another vendor's, or push
        notifications off, or no card at all with a pinned ``protocol``). A task that is not
        the caller's raises :class:`TaskNotFoundError`, refused credentials
        :class:`A2AAuthenticationError`."""
        task_id = shape.require_id(task_id)
        await self._ensure_open()
        card = await self._card()
        if card is None or extension(card, PUSH_STATUS_EXTENSION) is None:
            return None
        # Always on the agent's own base URL (where its card is): the credentials never go
        # to a URL the card names.
        url = f"{self._base}/push/status/{quote(task_id, safe='')}"
        try:
            response, content, whole = await get_at_most(self._http, url, MAX_ANSWER_BYTES)
        except httpx.DecodingError:  # reached: what it answered is broken
            raise InvalidAgentResponseError(
                f"{url} answered a body that cannot be decoded"
            ) from None
        if not response.is_success:
            raise refused(response, content, whole)
        if not whole:
            raise InvalidAgentResponseError(f"{url} answered more than {MAX_ANSWER_BYTES} bytes")
        answer = parse_json(content)[0] if is_json(response.headers.get("content-type")) else None
        if not isinstance(answer, dict) or not isinstance(answer.get("configs"), list):
            raise InvalidAgentResponseError(f"{url} did not answer a push status document")
        return answer

    @leaves_alone
    async def get_extended_card(self) -> dict[str, Any]:
        """Return the agent's extended (authenticated) card as served."""
        result, wire = await self._calls.call(
            "GetExtendedAgentCard", pb.GetExtendedAgentCardRequest()
        )
        card = wire if wire is not None else MessageToDict(result)  # gRPC serves protobuf
        if not isinstance(card, dict):
            raise InvalidAgentResponseError("the extended card is not an object")
        if self._verifier is not None:
            return await self._verifier.verify(card)
        return card


def _to_agent(base: str, tls: ssl.SSLContext) -> httpx.AsyncHTTPTransport:
    """The transport of the calls to the agent at *base* (all on its origin): through the
    proxy the environment names for it, as httpx's ``trust_env`` chooses it
    (``_proxies.proxy_for``), else direct. Only that proxy is judged: httpx's client built
    every proxy's transport, and one without ``socksio`` refused an agent ``NO_PROXY``
    exempts from it. Both verify with *tls* (``_proxies.trusted_context``)."""
    proxy = proxy_for(httpx.URL(base), strict=True)
    if proxy is None:
        return httpx.AsyncHTTPTransport(limits=KEPT, verify=tls)
    return proxy_transport(proxy, verify=tls)
