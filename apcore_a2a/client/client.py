"""``A2AClient``: call any A2A agent (protocol 1.0 or 0.3) with plain dicts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx

from apcore_a2a.client import _jsonrpc
from apcore_a2a.client._asgi import ASGIApp, DirectTransport, Lifespan
from apcore_a2a.client._dialects import Dialect, Protocol, select_endpoint
from apcore_a2a.client._messages import MessageInput, build_message, build_push_config
from apcore_a2a.client._origin import OriginGuard, check_endpoint, origin_of
from apcore_a2a.client._results import (
    decode_list,
    decode_push_config,
    decode_push_configs,
    decode_send_result,
    decode_task,
)
from apcore_a2a.client._resume import resumable
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


#: seconds to connect (and for an in-process app to start) when ``timeout`` is ``None``
CONNECT_TIMEOUT = 30.0


def _require_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


class A2AClient:
    """An async client for one A2A agent.

    ``url`` is the agent's base URL (its card lives under ``/.well-known/``). With
    ``protocol="auto"`` the card decides the wire version: 1.0 when it declares a 1.0
    JSON-RPC interface, else 0.3. ``auth`` is a bearer token string, an ``httpx.Auth``
    or a ``(user, password)`` pair; ``headers`` are sent with every request (e.g. an API
    key). Pass ``app=`` to talk to an ASGI app in this process without any socket
    ("direct mode"); the client then runs the app's lifespan unless ``lifespan=False``.

    The client calls the interface URLs the card names only when they have the origin
    (scheme, host, port) of ``url``; another origin -- including ``http`` under an
    ``https`` agent -- raises :class:`~apcore_a2a.client.errors.CrossOriginEndpointError`
    unless ``allow_other_origins=True``. Credentials (``auth`` and ``headers``) are only
    ever sent to the origin of ``url``.

    ``timeout`` bounds each request (connect, read, write) in seconds. The default,
    ``None``, waits as long as the agent takes -- a blocking ``send_message`` returns when
    the task finishes, however long it runs -- and gives up connecting after
    :data:`CONNECT_TIMEOUT` s. For a bound on long work, pass ``timeout=`` or use
    ``return_immediately=True`` (then ``get_task``) or ``stream_message``.

    With ``verify_card=True`` every card (public and extended) must carry a signature that
    the a2a-sdk's verifier accepts with the agent's ``/.well-known/jwks.json`` -- or with
    ``card_keys`` (a JWKS, a JWK or a PEM public key; giving them implies verification) --
    else :class:`~apcore_a2a.client.errors.CardVerificationError`. The card the client then
    uses (and :meth:`discover` returns) is the signed view: the A2A 1.0 fields only.

    All results are plain dicts in one shape whatever the wire version (see
    docs/client.md). Errors are :class:`~apcore_a2a.client.errors.A2AClientError`
    subclasses.

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
        self._direct = app is not None
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
        startup = timeout if timeout is not None else CONNECT_TIMEOUT
        self._lifespan = Lifespan(app, timeout=startup) if app is not None and lifespan else None
        transport = None
        if app is not None:
            state = self._lifespan.state if self._lifespan else None
            transport = DirectTransport(app, state=state)
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=startup),
            headers=default_headers,
            auth=guard,
            transport=transport,
        )
        self._verifier = (
            CardVerifier(self._http, self._base, card_keys)
            if verify_card or card_keys is not None
            else None
        )
        self._cards = AgentCardFetcher(
            self._http,
            self._base,
            ttl=card_ttl,
            verify=self._verifier.verify if self._verifier is not None else None,
        )
        self._pinned: tuple[Dialect, str] | None = None
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
        if self._lifespan is not None and self._started:
            await self._lifespan.shutdown()

    async def _ensure_open(self) -> None:
        if self._closed:
            raise A2AClientError("the client is closed")
        if self._lifespan is None or self._started:
            return
        async with self._start_lock:
            if not self._started:
                try:
                    await self._lifespan.startup()
                except (RuntimeError, TimeoutError) as exc:
                    raise A2AConnectionError(
                        f"the in-process agent failed to start: {exc}"
                    ) from exc
                self._started = True

    # -- discovery ---------------------------------------------------------------------
    async def discover(self, *, refresh: bool = False) -> dict[str, Any]:
        """Return the agent card (cached for ``card_ttl`` seconds) as served."""
        await self._ensure_open()
        return await self._cards.fetch(refresh=refresh)

    async def agent_card(self) -> dict[str, Any]:
        """Same as :meth:`discover`."""
        return await self.discover()

    async def _endpoint(self) -> tuple[Dialect, str]:
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

    def _checked(self, dialect: Dialect, url: str) -> tuple[Dialect, str]:
        return dialect, check_endpoint(
            url, self._base, allow_other_origins=self._allow_other_origins, direct=self._direct
        )

    # -- messages ----------------------------------------------------------------------
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
        msg = build_message(message, context_id=context_id, task_id=task_id, skill_id=skill_id)
        dialect, url = await self._endpoint()
        params = dialect.send_params(msg, metadata=metadata, return_immediately=return_immediately)
        return decode_send_result(
            await _jsonrpc.call(self._http, dialect.version, url, dialect.send, params),
            dialect.version,
        )

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
        msg = build_message(message, context_id=context_id, task_id=task_id, skill_id=skill_id)

        def send(dialect: Dialect) -> tuple[str, Mapping[str, Any]]:
            params = dialect.send_params(msg, metadata=metadata, return_immediately=False)
            return dialect.stream, params

        return resumable(self._endpoint, self._http, None, None, max_retries, send)

    # -- tasks -------------------------------------------------------------------------
    async def get_task(self, task_id: str, history_length: int | None = None) -> dict[str, Any]:
        """Return the task with ``task_id`` (its last ``history_length`` messages, if set)."""
        params: dict[str, Any] = {"id": _require_id(task_id, "task_id")}
        if history_length is not None:
            if history_length < 0:
                raise ValueError("history_length must be >= 0")
            params["historyLength"] = history_length
        dialect, url = await self._endpoint()
        return decode_task(
            await _jsonrpc.call(self._http, dialect.version, url, dialect.get, params)
        )

    async def cancel_task(self, task_id: str) -> dict[str, Any]:
        """Ask the agent to cancel the task; return the task as the agent reports it."""
        params = {"id": _require_id(task_id, "task_id")}
        dialect, url = await self._endpoint()
        return decode_task(
            await _jsonrpc.call(self._http, dialect.version, url, dialect.cancel, params)
        )

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
        dialect, url = await self._endpoint()
        if dialect.list is None:
            raise UnsupportedOperationError(
                "listing tasks is not part of A2A 0.3 (the protocol spoken to this agent)"
            )
        params: dict[str, Any] = {"pageSize": limit}
        if context_id:
            params["contextId"] = context_id
        if cursor:
            params["pageToken"] = cursor
        if status:
            params["status"] = "TASK_STATE_" + status.upper().replace("-", "_").removeprefix(
                "TASK_STATE_"
            )
        if include_artifacts:
            params["includeArtifacts"] = True
        return decode_list(
            await _jsonrpc.call(self._http, dialect.version, url, dialect.list, params)
        )

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
        return resumable(
            self._endpoint, self._http, _require_id(task_id, "task_id"), last_event_id, max_retries
        )

    # -- push notification configs -----------------------------------------------------
    async def set_push_config(
        self, task_id: str, config: str | Mapping[str, Any]
    ) -> dict[str, Any]:
        """Register a push endpoint for a task: a URL or ``{url, id?, token?, authentication?}``."""
        cfg = build_push_config(_require_id(task_id, "task_id"), config)
        dialect, url = await self._endpoint()
        result = await _jsonrpc.call(
            self._http, dialect.version, url, dialect.push_set, dialect.push_set_params(cfg)
        )
        return decode_push_config(result)

    async def get_push_config(self, task_id: str, config_id: str) -> dict[str, Any]:
        """Return one push config of a task."""
        dialect, url = await self._endpoint()
        params = dialect.push_ref_params(
            _require_id(task_id, "task_id"), _require_id(config_id, "config_id")
        )
        return decode_push_config(
            await _jsonrpc.call(self._http, dialect.version, url, dialect.push_get, params)
        )

    async def list_push_configs(self, task_id: str) -> list[dict[str, Any]]:
        """Return every push config of a task."""
        dialect, url = await self._endpoint()
        params = dialect.push_ref_params(_require_id(task_id, "task_id"), None)
        return decode_push_configs(
            await _jsonrpc.call(self._http, dialect.version, url, dialect.push_list, params)
        )

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Delete one push config of a task."""
        dialect, url = await self._endpoint()
        params = dialect.push_ref_params(
            _require_id(task_id, "task_id"), _require_id(config_id, "config_id")
        )
        await _jsonrpc.call(self._http, dialect.version, url, dialect.push_delete, params)

    async def get_extended_card(self) -> dict[str, Any]:
        """Return the agent's extended (authenticated) card as served."""
        dialect, url = await self._endpoint()
        card = await _jsonrpc.call(self._http, dialect.version, url, dialect.extended_card, {})
        if not isinstance(card, dict):
            raise InvalidAgentResponseError("the extended card is not an object")
        if self._verifier is not None:
            return await self._verifier.verify(card)
        return card
