"""``A2AClient``: call any A2A agent (protocol 1.0 or 0.3) with plain dicts.

The wire work is a2a-sdk's: its JSON-RPC client transports (1.0, and 0.3 from
``a2a.compat``) send each call; this module turns the caller's values into their
requests and their results into the documented dicts, picks the endpoint from the card,
and resumes dropped streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from a2a.client.transports.base import ClientTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types import a2a_pb2 as pb
from asgi_lifespan import LifespanManager, LifespanNotSupported
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as Proto

from apcore_a2a.client import _results as shape
from apcore_a2a.client._asgi import ASGIApp, DirectTransport
from apcore_a2a.client._messages import MessageInput, build_message, build_push_config
from apcore_a2a.client._origin import OriginGuard, check_endpoint, origin_of
from apcore_a2a.client._spans import a2a_call
from apcore_a2a.client._wire import Call, context, current, on_response, translated
from apcore_a2a.client.card_fetcher import CARD_PATHS, AgentCardFetcher
from apcore_a2a.client.card_verify import CardKeys, CardVerifier
from apcore_a2a.client.errors import (
    A2AClientError,
    A2AConnectionError,
    A2ADiscoveryError,
    InvalidAgentResponseError,
    UnsupportedOperationError,
)

__all__ = ["A2AClient"]

AuthInput = str | httpx.Auth | tuple[str, str] | None
Protocol = Literal["auto", "1.0", "0.3"]
#: A2A method -> the SDK transport's method
_SDK_METHODS = {
    "SendMessage": "send_message",
    "SendStreamingMessage": "send_message_streaming",
    "GetTask": "get_task",
    "CancelTask": "cancel_task",
    "ListTasks": "list_tasks",
    "SubscribeToTask": "subscribe",
    "CreateTaskPushNotificationConfig": "create_task_push_notification_config",
    "GetTaskPushNotificationConfig": "get_task_push_notification_config",
    "ListTaskPushNotificationConfigs": "list_task_push_notification_configs",
    "DeleteTaskPushNotificationConfig": "delete_task_push_notification_config",
    "GetExtendedAgentCard": "get_extended_agent_card",
}
#: The 1.0 transport answers GetExtendedAgentCard from the card it was given unless that
#: card says there is an extended one; the client always asks the agent.
_ASK_FOR_EXTENDED = pb.AgentCard(capabilities=pb.AgentCapabilities(extended_agent_card=True))


def _normalize_url(url: str) -> str:
    if not isinstance(url, str):
        raise ValueError(f"agent URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"agent URL must be an absolute http(s) URL, got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"agent URL must not carry a query or fragment, got {url!r}")
    base = url.strip().rstrip("/")
    for path in CARD_PATHS:  # a card URL given by mistake names the same agent
        base = base.removesuffix(path)
    return base.rstrip("/")


def _require_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


def _jsonrpc_urls(card: Mapping[str, Any], major: str) -> list[str]:
    urls = [
        str(i.get("url") or "")
        for i in card.get("supportedInterfaces") or []
        if isinstance(i, Mapping)
        and str(i.get("protocolBinding") or "").upper() == "JSONRPC"
        # An unversioned interface is a 0.3-era declaration (the SDK reads it that way too).
        and (str(i.get("protocolVersion") or "0").split(".")[0]) == major
    ]
    if major == "0":
        if str(card.get("preferredTransport") or "JSONRPC").upper() == "JSONRPC":
            urls.append(str(card.get("url") or ""))
        urls += [
            str(i.get("url") or "")
            for i in card.get("additionalInterfaces") or []
            if isinstance(i, Mapping) and str(i.get("transport")).upper() == "JSONRPC"
        ]
    return [u for u in urls if u]


def select_endpoint(
    card: Mapping[str, Any] | None, base_url: str, protocol: Protocol
) -> tuple[str, str]:
    """``(version, JSON-RPC URL)``: ``auto`` speaks 1.0 when the card declares a 1.0
    JSON-RPC interface, else 0.3; a pinned version falls back to the client's own URL.
    ``auto`` raises :class:`A2ADiscoveryError` for a card without a JSON-RPC interface."""
    v10 = _jsonrpc_urls(card, "1") if card else []
    v03 = _jsonrpc_urls(card, "0") if card else []
    if protocol == "auto" and card and card.get("supportedInterfaces") and not (v10 or v03):
        bindings = sorted({str(i.get("protocolBinding")) for i in card["supportedInterfaces"]})
        raise A2ADiscoveryError(
            f"the agent offers no JSON-RPC interface (only {', '.join(bindings)}); "
            "this client speaks JSON-RPC"
        )
    if protocol == "1.0" or (protocol == "auto" and v10):
        return "1.0", v10[0] if v10 else base_url
    return "0.3", v03[0] if v03 else base_url


def _failing_loudly(app: ASGIApp) -> ASGIApp:
    """*app*, raising when it reports ``lifespan.startup.failed``: asgi-lifespan waits for
    a "complete" message only, so an app that reports the failure and returns would hang
    it until the timeout."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        async def checked_send(message: Any) -> None:
            if str(message.get("type", "")).endswith(".failed"):
                raise RuntimeError(message.get("message") or "the app failed to start")
            await send(message)

        await app(scope, receive, checked_send)

    return wrapped


#: seconds to connect (and for an in-process app to start) when ``timeout`` is ``None``
CONNECT_TIMEOUT = 30.0


class A2AClient:
    """An async client for one A2A agent (docs/client.md has the whole contract).

    ``url`` is the agent's base URL. ``protocol="auto"`` lets the card decide the wire
    version (1.0 when it declares a 1.0 JSON-RPC interface, else 0.3). ``auth`` is a
    bearer token, an ``httpx.Auth`` or a ``(user, password)`` pair; ``headers`` go with
    every request. ``app=`` calls an ASGI app in this process without any socket, running
    its lifespan unless ``lifespan=False``. Interface URLs of another origin than ``url``'s
    raise :class:`CrossOriginEndpointError` unless ``allow_other_origins=True``, and never
    get the credentials. ``verify_card=True`` (or ``card_keys``) requires a valid card
    signature. Results are plain dicts in one shape whatever the wire version; errors are
    :class:`A2AClientError` subclasses.

    ``timeout`` bounds each request in seconds; ``None`` (the default) waits as long as the
    agent takes -- a blocking ``send_message`` returns when the task ends, however long it
    runs -- and gives up connecting after :data:`CONNECT_TIMEOUT` s. To bound long work,
    pass a number, or use ``return_immediately=True`` (then ``get_task``) or streaming.

    Example::

        async with A2AClient("http://127.0.0.1:8000") as client:
            task = await client.send_message("hello", skill_id="text.echo")
            print(task["status"]["state"], task["artifacts"][0]["parts"][0]["text"])
    """

    def __init__(
        self,
        url: str,
        *,
        auth: AuthInput = None,
        timeout: float | None = None,
        card_ttl: float = 300.0,
        protocol: Protocol = "auto",
        headers: Mapping[str, str] | None = None,
        app: ASGIApp | None = None,
        lifespan: bool = True,
        allow_other_origins: bool = False,
        verify_card: bool = False,
        card_keys: CardKeys | None = None,
    ) -> None:
        self._base = _normalize_url(url)
        self._allow_other_origins = allow_other_origins
        if protocol not in ("auto", "1.0", "0.3"):
            raise ValueError(f"protocol must be 'auto', '1.0' or '0.3', got {protocol!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive (or None for no timeout)")
        self._protocol: Protocol = protocol
        self._timeout = timeout
        default_headers = dict(headers or {})
        inner_auth: httpx.Auth | None = None
        if isinstance(auth, str):
            default_headers["Authorization"] = f"Bearer {auth}"
        elif isinstance(auth, tuple):
            inner_auth = httpx.BasicAuth(*auth)
        else:
            inner_auth = auth
        guard = OriginGuard(origin_of(self._base), inner_auth, default_headers)
        self._app = app
        self._direct = DirectTransport(app) if app is not None else None
        self._lifespan: LifespanManager | None = None
        self._run_lifespan = app is not None and lifespan
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=timeout or CONNECT_TIMEOUT),
            headers=default_headers,
            auth=guard,
            transport=self._direct,
            event_hooks={"response": [on_response]},
        )
        verifying = verify_card or card_keys is not None
        self._verifier = CardVerifier(self._http, self._base, card_keys) if verifying else None
        verify = self._verifier.verify if self._verifier is not None else None
        self._cards = AgentCardFetcher(self._http, self._base, ttl=card_ttl, verify=verify)
        self._pinned: tuple[str, str] | None = None
        self._started = False
        self._closed = False
        self._start_lock = asyncio.Lock()

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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled HTTP client (and shut down an in-process app we started)."""
        if self._closed:
            return
        self._closed = True
        await self._http.aclose()
        if self._lifespan is not None:
            with contextlib.suppress(Exception):  # a failed shutdown is the app's to log
                await self._lifespan.__aexit__(None, None, None)

    async def _ensure_open(self) -> None:
        if self._closed:
            raise A2AClientError("the client is closed")
        if self._started or not self._run_lifespan:
            return
        async with self._start_lock:
            if self._started or self._app is None or self._direct is None:
                return
            bound = self._timeout or CONNECT_TIMEOUT
            manager = LifespanManager(_failing_loudly(self._app), bound, bound)
            try:
                await manager.__aenter__()
            except LifespanNotSupported:
                pass  # an app without lifespan is used as is
            except Exception as exc:
                raise A2AConnectionError(f"the in-process agent failed to start: {exc}") from exc
            else:
                self._lifespan = manager
                self._direct.app = manager.app  # requests see the lifespan state
            self._started = True

    # -- discovery ---------------------------------------------------------------------
    async def discover(self, *, refresh: bool = False) -> dict[str, Any]:
        """Return the agent card (cached for ``card_ttl`` seconds) as served."""
        await self._ensure_open()
        return await self._cards.fetch(refresh=refresh)

    async def agent_card(self) -> dict[str, Any]:
        """Same as :meth:`discover`."""
        return await self.discover()

    async def _endpoint(self) -> tuple[str, str]:
        await self._ensure_open()
        if self._protocol == "auto":
            return self._checked(*select_endpoint(await self._cards.fetch(), self._base, "auto"))
        if self._pinned is None:
            try:
                card: dict[str, Any] | None = await self._cards.fetch()
            except A2ADiscoveryError:
                if self._verifier is not None:
                    raise  # asked to verify: no card (or a bad one) is never worked around
                card = None  # a pinned version does not need the card
            self._pinned = self._checked(*select_endpoint(card, self._base, self._protocol))
        return self._pinned

    def _checked(self, version: str, url: str) -> tuple[str, str]:
        return version, check_endpoint(
            url,
            self._base,
            allow_other_origins=self._allow_other_origins,
            direct=self._direct is not None,
        )

    def _transport(self, version: str, url: str) -> ClientTransport:
        if version == "1.0":
            return JsonRpcTransport(self._http, _ASK_FOR_EXTENDED, url, is_shared_httpx=True)
        return CompatJsonRpcTransport(self._http, None, url, is_shared_httpx=True)

    @staticmethod
    def _headers(version: str, last_event_id: str | None = None) -> dict[str, str]:
        # The 0.3 transport sets its A2A-Version itself.
        headers = {"A2A-Version": "1.0"} if version == "1.0" else {}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        return headers

    async def _call(self, method: str, request: Proto) -> tuple[Any, Any]:
        """Run one SDK call; return its result and the ``result`` as received."""
        version, url = await self._endpoint()
        headers = self._headers(version)
        with a2a_call(method, version, url, MessageToDict(request), headers) as seen:
            call = Call(seen)
            invoke = getattr(self._transport(version, url), _SDK_METHODS[method])
            with translated(method, url), current(call):
                result = await invoke(request, context=context(headers))
            return result, call.wire

    async def _events(
        self, method: str, request: Proto, call: Call, resume: bool
    ) -> AsyncIterator[dict[str, Any]]:
        """One SDK stream as client events, up to a final one."""
        version, url = await self._endpoint()
        headers = self._headers(version, call.event_id if resume else None)
        with a2a_call(method, version, url, MessageToDict(request), headers) as seen:
            call.seen = seen
            open_stream = getattr(self._transport(version, url), _SDK_METHODS[method])
            with translated(method, url):
                async with contextlib.aclosing(
                    open_stream(request, context=context(headers))
                ) as stream:
                    while True:
                        with current(call):
                            try:
                                item = await anext(stream)
                            except StopAsyncIteration:
                                return
                        event = shape.event(item, call.wire)
                        if event is None:
                            continue
                        yield event
                        if shape.is_final(event):
                            return

    async def _resumable(
        self,
        task_id: str | None,
        last_event_id: str | None,
        max_retries: int,
        first: pb.SendMessageRequest | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Events of a subscription to *task_id* (or of the message stream *first*
        opens), resumed by subscription after the last SSE id seen whenever the
        connection drops: at most *max_retries* times in a row (0.25, 0.5, 1 s ...
        apart), then :class:`A2AConnectionError`."""
        call = Call(seen=lambda _doc: None, event_id=last_event_id)
        failures = 0
        while True:
            if first is None:
                method, request = "SubscribeToTask", pb.SubscribeToTaskRequest(id=task_id)
            else:
                method, request = "SendStreamingMessage", first
            try:
                async for event in self._events(method, request, call, first is None):
                    failures = 0
                    if task_id is None:
                        task_id = event["id"] if event["kind"] == "task" else event["taskId"]
                    yield event
                return
            except A2AConnectionError as exc:
                can_resume = call.event_id is not None and task_id is not None
                if not can_resume or exc.status_code is not None or failures >= max_retries:
                    if failures:
                        raise A2AConnectionError(
                            f"stream of task {task_id} lost; gave up after "
                            f"{failures} resume attempt(s): {exc}"
                        ) from exc
                    raise
                first = None  # from now on: the task's events after the last id seen
                failures += 1
                await asyncio.sleep(0.25 * 2 ** (failures - 1))

    # -- messages ----------------------------------------------------------------------
    @staticmethod
    def _send_request(
        message: MessageInput,
        metadata: Mapping[str, Any] | None,
        context_id: str | None,
        task_id: str | None,
        skill_id: str | None,
        return_immediately: bool,
    ) -> pb.SendMessageRequest:
        msg = build_message(message, context_id=context_id, task_id=task_id, skill_id=skill_id)
        request = pb.SendMessageRequest(message=ParseDict(msg, pb.Message()))
        if metadata:
            request.metadata.update(dict(metadata))
        # Set even when empty: the 0.3 transport then sends ``blocking: true`` explicitly.
        request.configuration.return_immediately = return_immediately
        request.configuration.SetInParent()
        return request

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

        ``message`` may be a ``str`` (a text part), ``bytes`` (a file part), a mapping
        without ``parts`` (a data part), a list of parts, or a full message mapping in
        the seed, 0.3 or 1.0 shape. ``skill_id`` names the skill in
        ``message.metadata.skillId``; ``metadata`` is request-level metadata. By default
        the call waits for a terminal or interrupted state; ``return_immediately=True``
        returns as soon as the task exists.
        """
        request = self._send_request(
            message, metadata, context_id, task_id, skill_id, return_immediately
        )
        result, wire = await self._call("SendMessage", request)
        event = shape.event(result, wire)
        if event is None or event["kind"] not in ("task", "message"):
            raise InvalidAgentResponseError(f"agent returned an invalid send result: {wire!r:.200}")
        return event

    def stream_message(
        self,
        message: MessageInput,
        *,
        metadata: Mapping[str, Any] | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
        skill_id: str | None = None,
        max_retries: int = 3,
    ) -> AsyncIterator[dict[str, Any]]:
        """Send a message and iterate over the task's events as they happen.

        The iterator ends after a final event (a terminal task state, an interrupted
        state such as ``input-required``, or a reply message) or when the agent closes
        the stream. An error frame raises the matching typed exception. When the
        connection drops mid-stream and the agent sent event ids, the iterator resumes
        the task's events with a subscription from the last id it saw (as
        :meth:`resubscribe` does): nothing is lost or repeated; after *max_retries*
        failed attempts in a row it raises :class:`A2AConnectionError`.
        """
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        request = self._send_request(message, metadata, context_id, task_id, skill_id, False)
        return self._resumable(None, None, max_retries, request)

    # -- tasks -------------------------------------------------------------------------
    async def get_task(self, task_id: str, history_length: int | None = None) -> dict[str, Any]:
        """Return the task with ``task_id`` (its last ``history_length`` messages, if set)."""
        request = pb.GetTaskRequest(id=_require_id(task_id, "task_id"))
        if history_length is not None:
            if history_length < 0:
                raise ValueError("history_length must be >= 0")
            request.history_length = history_length
        result, _ = await self._call("GetTask", request)
        return shape.task(result)

    async def cancel_task(self, task_id: str) -> dict[str, Any]:
        """Ask the agent to cancel the task; return the task as the agent reports it."""
        request = pb.CancelTaskRequest(id=_require_id(task_id, "task_id"))
        result, _ = await self._call("CancelTask", request)
        return shape.task(result)

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

        Pass the returned ``nextCursor`` as ``cursor`` for the next page; it is ``None``
        on the last page. A2A 0.3 has no task listing: on a 0.3 agent this raises
        :class:`UnsupportedOperationError` without a request.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError("limit must be a positive integer")
        if (await self._endpoint())[0] != "1.0":
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
        result, _ = await self._call("ListTasks", request)
        return shape.tasks(result)

    def resubscribe(
        self, task_id: str, *, last_event_id: str | None = None, max_retries: int = 3
    ) -> AsyncIterator[dict[str, Any]]:
        """Iterate over a running task's events: first the task as it is now, then updates.

        With *last_event_id* (an SSE id of an earlier subscription), the agent replays the
        events after it instead of sending the task first. When the connection drops
        mid-stream and the agent sent event ids, the iterator reconnects with the last id
        it saw, so no event is lost or repeated: at most *max_retries* times in a row
        (0.25, 0.5, 1 s ... apart); then it raises :class:`A2AConnectionError`.
        """
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        return self._resumable(_require_id(task_id, "task_id"), last_event_id, max_retries)

    # -- push notification configs -----------------------------------------------------
    async def set_push_config(
        self, task_id: str, config: str | Mapping[str, Any]
    ) -> dict[str, Any]:
        """Register a push endpoint for a task: a URL or ``{url, id?, token?, authentication?}``."""
        request = ParseDict(
            build_push_config(_require_id(task_id, "task_id"), config),
            pb.TaskPushNotificationConfig(),
        )
        result, wire = await self._call("CreateTaskPushNotificationConfig", request)
        return shape.push_config(result, wire)

    async def get_push_config(self, task_id: str, config_id: str) -> dict[str, Any]:
        """Return one push config of a task."""
        request = pb.GetTaskPushNotificationConfigRequest(
            task_id=_require_id(task_id, "task_id"), id=_require_id(config_id, "config_id")
        )
        result, wire = await self._call("GetTaskPushNotificationConfig", request)
        return shape.push_config(result, wire)

    async def list_push_configs(self, task_id: str) -> list[dict[str, Any]]:
        """Return every push config of a task."""
        request = pb.ListTaskPushNotificationConfigsRequest(task_id=_require_id(task_id, "task_id"))
        result, wire = await self._call("ListTaskPushNotificationConfigs", request)
        wired = (wire.get("configs") if isinstance(wire, Mapping) else wire) or []
        wired = wired if isinstance(wired, list) else []
        return [
            shape.push_config(config, wired[i] if i < len(wired) else None)
            for i, config in enumerate(result.configs)
        ]

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Delete one push config of a task."""
        request = pb.DeleteTaskPushNotificationConfigRequest(
            task_id=_require_id(task_id, "task_id"), id=_require_id(config_id, "config_id")
        )
        await self._call("DeleteTaskPushNotificationConfig", request)

    async def get_extended_card(self) -> dict[str, Any]:
        """Return the agent's extended (authenticated) card as served."""
        request = pb.GetExtendedAgentCardRequest()
        _, card = await self._call("GetExtendedAgentCard", request)
        if not isinstance(card, dict):
            raise InvalidAgentResponseError("the extended card is not an object")
        if self._verifier is not None:
            return await self._verifier.verify(card)
        return card
