"""Push notifications: SSRF policy, bounded retrying signed delivery, JWKS, config status.

The SDK stores configs and calls a ``PushNotificationSender`` for each task event; this
package adds what it leaves out, as one :class:`PushKit` (:func:`build_push`) that the
server factory hands to the request handler and starts with the app. The delivery status
of a config is not in any A2A answer (the config answers are exactly the SDK's); its owner
reads it at ``GET /push/status/{task_id}`` (:func:`status_route`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.types import AgentExtension, ListTaskPushNotificationConfigsRequest
from a2a.utils.error_handlers import rest_error_handler
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from apcore_a2a._lazy import lazy_names
from apcore_a2a.classify import JWKS_PATH, PUSH_STATUS_PATH
from apcore_a2a.edge.call import CallRecord, record_of
from apcore_a2a.push.attempt import SIGNATURE_HEADER
from apcore_a2a.push.configs import PushConfigStore
from apcore_a2a.push.dns import AresResolver
from apcore_a2a.push.policy import PushUrlPolicy, Resolver
from apcore_a2a.push.sender import RetryingPushSender
from apcore_a2a.push.status import ConfigStatusBook, create_tables, signing_keys
from apcore_a2a.storage.outages import guarded
from apcore_a2a.upstream.jsonrpc03_push import JsonRpc03PushCorrections

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.request_handlers import RequestHandler
    from a2a.server.routes.common import ServerCallContextBuilder
    from a2a.types import Task, TaskStatusUpdateEvent
    from sqlalchemy.ext.asyncio import AsyncEngine

    from apcore_a2a.push.signing import SigningKey
    from apcore_a2a.settings import Settings
    from apcore_a2a.storage.quota_slots import SqlQuotaSlots

__all__ = [
    "JWKS_PATH",
    "PUSH_SIGNING_EXTENSION_URI",
    "PUSH_STATUS_EXTENSION_URI",
    "AresResolver",
    "ConfigStatusBook",
    "PushKit",
    "PushUrlPolicy",
    "SigningKey",
    "build_push",
    "card_extensions",
    "jwks_route",
]

logger = logging.getLogger("apcore_a2a.push")


# SigningKey (PyJWT, cryptography) is imported once push or card signing needs it, not by
# an agent that uses neither (start-up cost, ``docs/operations.md``)
__getattr__ = lazy_names(__name__, {"SigningKey": "apcore_a2a.push.signing"}, globals())


#: Card extension that tells receivers where the delivery-signing keys are published.
PUSH_SIGNING_EXTENSION_URI = "urn:apcore:a2a:push-signing:v1"
#: Card extension saying the agent serves the owner's status route.
PUSH_STATUS_EXTENSION_URI = "urn:apcore:a2a:push-status:v1"


def status_route(
    handler: RequestHandler,
    statuses: ConfigStatusBook,
    context_builder: ServerCallContextBuilder,
) -> Route:
    """``GET /push/status/{task_id}``: the delivery status of a task's push configs, for
    their owner, outside the A2A wire (A2A's ``TaskPushNotificationConfig`` has no status,
    and a strict proto-JSON peer rejects members the schema lacks).

    The route passes the same admission as an A2A call (``classify`` kind ``"push"``:
    authentication, roles and scopes, 401/403), lists the configs through the request
    handler's ``on_list_task_push_notification_configs`` with the caller's
    ``ServerCallContext`` (so only the owner's task answers; another owner's or an unknown
    one is A2A's ``TaskNotFoundError``: HTTP 404 with the REST error body) and adds each
    config's status. Its errors, ours included (a store outage, also of the status
    records: 503 with ``Retry-After``), are answered as the A2A REST routes answer them
    (``streams/answers.py``)::

        {"taskId": "t-1", "configs": [{"id": "mine", "url": "https://hooks.example.com/a2a",
          "status": "failed", "statusReason": "HTTP 503 (after 4 attempts)"}]}
    """

    @rest_error_handler
    async def endpoint(request: Request) -> Response:
        task_id = str(request.path_params["task_id"])
        listed = await handler.on_list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id), context_builder.build(request)
        )
        states = await guarded(statuses.of(task_id, list(listed.configs))) if listed.configs else {}
        configs: list[dict[str, Any]] = []
        for config in listed.configs:
            config_id = config.id or task_id  # as the stores default it
            reason = states[config_id][1]
            status = "active" if reason is None else "failed"
            configs.append(
                {"id": config_id, "url": config.url, "status": status, "statusReason": reason}
            )
        document = {"taskId": task_id, "configs": configs}
        return JSONResponse(document, headers={"Cache-Control": "no-store"})

    return Route(PUSH_STATUS_PATH, endpoint, methods=["GET"], name="push_status")


def jwks_route(sources: Sequence[Callable[[], dict[str, Any] | None]]) -> Route:
    """``GET /.well-known/jwks.json``: the keys of every source that has one, one entry per
    ``kid`` (card and delivery signatures use different keys), cacheable for 5 minutes; 503
    until some source has loaded its key."""

    async def endpoint(request: Request) -> Response:
        keys: dict[str, dict[str, Any]] = {}
        for source in sources:
            jwk = source()
            if jwk is not None:
                keys.setdefault(str(jwk.get("kid")), jwk)
        if not keys:
            return JSONResponse({"error": "signing keys not loaded yet"}, status_code=503)
        document = {"keys": list(keys.values())}
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=300"})

    return Route(JWKS_PATH, endpoint, methods=["GET"], name="jwks")


@dataclass(eq=False)
class PushKit:
    """What the server factory wires in: the handler's ``push_sender``, ``push_config_store``
    and ``push_url_check`` (``url_check(url, call)``), the routes, and ``middleware``
    (the seam's JSON-RPC 0.3 push-config corrections, ``upstream/jsonrpc03_push.py``)."""

    sender: RetryingPushSender
    url_check: Callable[[str, CallRecord], Awaitable[None]]
    config_store: PushConfigStore
    statuses: ConfigStatusBook
    middleware: list[Middleware]
    #: The configured key from the start, else the stored or generated one after ``start``.
    signing_key: SigningKey | None = None
    drain_timeout: float = 10.0
    _engine: AsyncEngine | None = None
    _encryption_key: str | None = None

    def saved(self, task: Task, context: ServerCallContext) -> None:
        """A save listener for the task store: 0.3 deliveries carry the saved task, and
        the task's deliveries count against the share of its caller (the call's quota key)."""
        self.sender.snapshots[task.id] = task
        self.sender.callers[task.id] = record_of(context).caller

    async def forgotten(self, task_id: str, owner: ServerCallContext) -> None:
        """A listener of the tasks the memory store forgets (evicted or deleted): their
        configs (the memory config store kept them for good), records and deliveries go
        with them."""
        if await self.config_store.get_info(task_id, owner):  # else the SDK warns
            await self.config_store.delete_info(task_id, owner)

    async def interrupted(self, task: Task, event: TaskStatusUpdateEvent) -> None:
        """A listener of the stores' interrupted tasks (``Stores.on_interrupted``): no run
        reports these failures, so they are pushed from here."""
        self.sender.snapshots[task.id] = task
        await self.sender.send_settled(task.id, event)

    def routes_for(
        self, handler: RequestHandler, context_builder: ServerCallContextBuilder
    ) -> list[BaseRoute]:
        """The JWKS route and the owner's status route; mount before the SDK's REST."""
        return [
            jwks_route([self.public_jwk]),
            status_route(handler, self.statuses, context_builder),
        ]

    def public_jwk(self) -> dict[str, Any] | None:
        """The delivery-signing key as a JWK, once loaded."""
        return dict(self.signing_key.public_jwk) if self.signing_key is not None else None

    async def start(self) -> None:
        """Load or create the signing key, create tables, start the sender."""
        from apcore_a2a.push.signing import SigningKey, stored_key

        key, engine = self.signing_key, self._engine
        if engine is not None:
            await create_tables(engine)
            what = "push signing key"
            key = key or await stored_key(engine, signing_keys, self._encryption_key, what)
        self.signing_key = key = key or SigningKey.generate()
        self.sender.start(key)
        logger.info("push: signing deliveries with %s key %s", key.algorithm, key.kid)

    async def aclose(self) -> None:
        """Stop the sender after letting queued deliveries finish (bounded)."""
        await self.sender.aclose(drain_timeout=self.drain_timeout)


def build_push(
    settings: Settings,
    *,
    config_store: PushNotificationConfigStore,
    agent_url: str | Callable[[], str],
    engine: AsyncEngine | None = None,
    resolver: Resolver | None = None,
    slots: SqlQuotaSlots | None = None,
) -> PushKit:
    """Assemble the push components from *settings* (nothing runs until ``start``).

    *agent_url*: the JWTs' ``iss``, or a callable giving it per request (a mounted agent's
    includes its mount path). *engine* keeps the generated key and config status;
    *resolver* replaces the webhook lookups on ``push_dns_servers`` (tests); *slots* hold
    the config cap across processes."""
    if settings.push_allow_insecure_urls:
        logger.warning(
            "push: push_allow_insecure_urls is on - http:// and loopback webhooks are "
            "accepted; use this for development and tests only"
        )
    statuses = ConfigStatusBook(
        engine, max_tasks=settings.task_max_capacity, secret=settings.push_encryption_key
    )
    store = PushConfigStore(
        config_store, statuses, max_per_task=settings.push_max_configs_per_task, slots=slots
    )
    policy = PushUrlPolicy(
        allow_insecure=settings.push_allow_insecure_urls,
        resolver=resolver or AresResolver(settings.push_dns_servers),
        lookup_timeout=settings.push_timeout,
    )
    sender = RetryingPushSender(
        store,
        policy=policy,
        issuer=agent_url,
        timeout=settings.push_timeout,
        retry_delays=settings.push_retry_delays,
        queue_size=settings.push_queue_size,
        queue_bytes=settings.push_queue_bytes,
        max_deliveries=settings.push_max_deliveries,
    )
    store.changed = sender.forget
    from apcore_a2a.push.signing import SigningKey  # PyJWT, cryptography: with push only

    key = settings.push_signing_key
    return PushKit(
        sender=sender,
        url_check=policy.validate_call,
        config_store=store,
        statuses=statuses,
        middleware=[Middleware(JsonRpc03PushCorrections)],
        signing_key=SigningKey.from_pem(key) if key else None,
        drain_timeout=min(10.0, settings.shutdown_timeout),
        _engine=engine,
        _encryption_key=settings.push_encryption_key,
    )


def card_extensions(settings: Settings) -> list[AgentExtension]:
    """The card extensions (``AgentCapabilities.extensions``) of push notifications: none
    when they are off, else the one pointing receivers at the delivery-signing keys
    (``jwksUrl``, ``algorithm``, ``header``: where the JWT travels) and the one declaring
    the owner's status route (``path``, relative to the agent's base URL, where its card
    is)."""
    if not settings.push_notifications:
        return []
    from apcore_a2a.push.signing import SigningKey

    key = settings.push_signing_key
    algorithm = SigningKey.from_pem(key).algorithm if key else "ES256"
    description = (
        f"Push notifications carry '{SIGNATURE_HEADER}: <JWT>' signed by this agent; "
        "verify it with the keys at jwksUrl (claims iss, aud, iat, exp, jti, task_id, "
        "body_sha256 = hex SHA-256 of the request body). 'Authorization' carries the "
        "credentials of the push config's own 'authentication', when it has them."
    )
    jwks_url = settings.public_url().rstrip("/") + JWKS_PATH
    params = {"jwksUrl": jwks_url, "algorithm": algorithm, "header": SIGNATURE_HEADER}
    extension = AgentExtension(
        uri=PUSH_SIGNING_EXTENSION_URI, description=description, required=False, params=params
    )
    status = AgentExtension(
        uri=PUSH_STATUS_EXTENSION_URI,
        description=(
            "GET path (taskId filled in) on this agent's base URL, with the credentials of an "
            "A2A call, answers the delivery status of the caller's push configs of that "
            'task: {"taskId", "configs": [{"id", "url", "status": "active"|"failed", '
            '"statusReason"}]}; 404 for a task that is not the caller\'s.'
        ),
        required=False,
        params={"path": PUSH_STATUS_PATH.replace("{task_id}", "{taskId}")},
    )
    return [extension, status]
