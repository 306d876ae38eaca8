"""Push notifications: SSRF policy, bounded retrying signed delivery, JWKS, config status.

The SDK already stores configs (``Create/Get/List/DeleteTaskPushNotificationConfig`` on
every binding) and calls a ``PushNotificationSender`` for each task event. This package
supplies what the SDK leaves out, as one :class:`PushKit` that the server factory wires in:

* ``url_validator`` - the SSRF policy at registration, refusing with ``-32602`` and the reason;
* ``sender`` - ordered per config, retried with backoff, bounded in time and memory, each
  POST signed (JWT in ``X-A2A-Signature``) and shaped by the config's protocol version;
* ``config_store`` - the storage layer's store, plus the per-task cap, header checks and
  the ``active``/``failed`` status and protocol version of each config;
* ``observe(task_store)`` - the task store as the handler should see it (0.3 deliveries
  carry the whole task as just saved);
* ``routes_for(handler, ...)`` - ``/.well-known/jwks.json`` (auth-exempt) and the REST 0.3
  create/delete routes the SDK gets wrong;
* ``middleware`` - merges the status into the config answers where the shape allows;
* ``card_extension`` - an ``AgentExtension`` pointing receivers at the JWKS.

Example::

    kit = build_push(settings, config_store=store, agent_url=settings.public_url())
    handler = DefaultRequestHandler(task_store=kit.observe(task_store),
                                    push_config_store=kit.config_store,
                                    push_sender=kit.sender, ...)
    routes += kit.routes_for(handler, context_builder)
    await kit.start()
    ...
    await kit.aclose()
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.types import AgentExtension
from google.protobuf.struct_pb2 import Struct
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from apcore_a2a.push.bodies import PROTOCOL_VERSION_STATE_KEY, protocol_version
from apcore_a2a.push.configs import PushConfigStore
from apcore_a2a.push.policy import PushUrlPolicy, Resolver
from apcore_a2a.push.responses import PushResponseMiddleware
from apcore_a2a.push.sealing import seal, unseal
from apcore_a2a.push.sender import SIGNATURE_HEADER, RetryingPushSender
from apcore_a2a.push.signing import SigningKey, jwks_endpoint
from apcore_a2a.push.snapshots import TaskSnapshots
from apcore_a2a.push.status import ACTIVE, FAILED, ConfigStatusBook
from apcore_a2a.upstream.rest03_push_routes import rest03_push_routes

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from a2a.server.cluster import VersionedTaskStore
    from a2a.server.request_handlers import RequestHandler
    from a2a.server.routes.common import ServerCallContextBuilder
    from a2a.server.tasks import TaskStore
    from sqlalchemy.ext.asyncio import AsyncEngine

    from apcore_a2a.push._sql import PushTables
    from apcore_a2a.settings import Settings
    from apcore_a2a.storage.quota_slots import SqlQuotaSlots

__all__ = [
    "ACTIVE",
    "FAILED",
    "JWKS_PATH",
    "PROTOCOL_VERSION_STATE_KEY",
    "PUSH_SIGNING_EXTENSION_URI",
    "SIGNATURE_HEADER",
    "ConfigStatusBook",
    "PushConfigStore",
    "PushKit",
    "PushResponseMiddleware",
    "PushUrlPolicy",
    "RetryingPushSender",
    "SigningKey",
    "TaskSnapshots",
    "build_push",
    "card_extensions",
    "protocol_version",
    "push_card_extension",
]

logger = logging.getLogger("apcore_a2a.push")

JWKS_PATH = "/.well-known/jwks.json"
#: Card extension that tells receivers where the delivery-signing keys are published.
PUSH_SIGNING_EXTENSION_URI = "urn:apcore:a2a:push-signing:v1"


@dataclass(eq=False)
class PushKit:
    """Everything the server factory needs to enable push notifications."""

    sender: RetryingPushSender
    url_validator: Callable[[str], Awaitable[bool]]
    routes: list[BaseRoute]
    jwks_url: str
    config_store: PushConfigStore
    statuses: ConfigStatusBook
    policy: PushUrlPolicy
    card_extension: AgentExtension
    middleware: list[Middleware] = field(default_factory=list)
    signing_key: SigningKey | None = None
    drain_timeout: float = 10.0
    _configured_key: SigningKey | None = None
    _tables: PushTables | None = None
    _encryption_key: str | None = None

    def observe(self, task_store: TaskStore | VersionedTaskStore) -> TaskStore | VersionedTaskStore:
        """*task_store* as the request handler should get it (remembers saved tasks for
        the 0.3 deliveries, which carry the whole task)."""
        return self.sender.snapshots.observe(task_store)

    def routes_for(
        self, handler: RequestHandler, context_builder: ServerCallContextBuilder | None = None
    ) -> list[BaseRoute]:
        """The JWKS route and the REST 0.3 config routes; mount before the SDK's REST."""
        return [*self.routes, *rest03_push_routes(handler, context_builder)]

    async def start(self) -> None:
        """Load or create the signing key, create tables, start the sender."""
        if self._tables is not None:
            await self._tables.initialize()
        if self._configured_key is not None:
            self.signing_key = self._configured_key
        elif self._tables is not None:
            self.signing_key = await _stored_key(self._tables, self._encryption_key)
        else:
            self.signing_key = SigningKey.generate()
        self.sender.start(self.signing_key)
        logger.info(
            "push: signing deliveries with %s key %s",
            self.signing_key.algorithm,
            self.signing_key.kid,
        )

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

    *agent_url* is the agent's public base URL: the ``iss`` of delivery JWTs and the base of
    the JWKS URL; a callable gives it for the request being served (a mounted agent is
    reached under its mount path). With *engine*, a generated signing key and config
    failures are kept in that database. *resolver* replaces DNS resolution in the SSRF
    policy (tests). *slots* (cluster mode) hold the per-task config cap across processes.
    """
    configured = (
        SigningKey.from_pem(settings.push_signing_key) if settings.push_signing_key else None
    )
    if settings.push_allow_insecure_urls:
        logger.warning(
            "push: push_allow_insecure_urls is on - http:// and loopback webhooks are "
            "accepted; use this for development and tests only"
        )
    tables: PushTables | None = None
    if engine is not None:
        from apcore_a2a.push._sql import PushTables

        tables = PushTables(engine)
    statuses = ConfigStatusBook(tables, max_tasks=settings.task_max_capacity)
    store = PushConfigStore(
        config_store, statuses, max_per_task=settings.push_max_configs_per_task, slots=slots
    )
    policy = PushUrlPolicy(allow_insecure=settings.push_allow_insecure_urls, resolver=resolver)
    base = (agent_url if isinstance(agent_url, str) else agent_url()).rstrip("/")
    sender = RetryingPushSender(
        store,
        policy=policy,
        statuses=statuses,
        issuer=agent_url,
        timeout=settings.push_timeout,
        retry_delays=settings.push_retry_delays,
        queue_size=settings.push_queue_size,
        snapshots=TaskSnapshots(),
    )
    jwks_url = base + JWKS_PATH
    extension = push_card_extension(
        base, algorithm=configured.algorithm if configured is not None else "ES256"
    )
    kit = PushKit(
        sender=sender,
        url_validator=policy.validate,
        routes=[],
        jwks_url=jwks_url,
        config_store=store,
        statuses=statuses,
        policy=policy,
        card_extension=extension,
        middleware=[Middleware(PushResponseMiddleware, statuses=statuses)],
        drain_timeout=min(10.0, settings.shutdown_timeout),
        _configured_key=configured,
        _tables=tables,
        _encryption_key=settings.push_encryption_key,
    )
    kit.routes.append(
        Route(JWKS_PATH, jwks_endpoint(lambda: kit.signing_key), methods=["GET"], name="jwks")
    )
    return kit


def push_card_extension(agent_url: str, *, algorithm: str = "ES256") -> AgentExtension:
    """The card extension that points receivers at the agent's delivery-signing keys.

    Put it in ``AgentCapabilities.extensions``; its params are ``jwksUrl``, ``algorithm``
    and ``header`` (where the JWT travels).
    """
    params = Struct()
    params.update(
        {
            "jwksUrl": agent_url.rstrip("/") + JWKS_PATH,
            "algorithm": algorithm,
            "header": SIGNATURE_HEADER,
        }
    )
    return AgentExtension(
        uri=PUSH_SIGNING_EXTENSION_URI,
        description=(
            f"Push notifications carry '{SIGNATURE_HEADER}: <JWT>' signed by this agent; "
            "verify it with the keys at jwksUrl (claims iss, aud, iat, exp, jti, task_id, "
            "body_sha256 = hex SHA-256 of the request body). 'Authorization' carries the "
            "credentials of the push config's own 'authentication', when it has them."
        ),
        required=False,
        params=params,
    )


def card_extensions(settings: Settings) -> list[AgentExtension]:
    """``[push_card_extension(...)]`` when push notifications are on, else ``[]``."""
    if not settings.push_notifications:
        return []
    algorithm = (
        SigningKey.from_pem(settings.push_signing_key).algorithm
        if settings.push_signing_key
        else "ES256"
    )
    return [push_card_extension(settings.public_url(), algorithm=algorithm)]


async def _stored_key(tables: PushTables, encryption_key: str | None) -> SigningKey:
    """The key kept in the database, generated and stored on first use."""
    data = await tables.first_key()
    if data is None:
        fresh = SigningKey.generate()
        pem = fresh.to_pem().decode()
        await tables.add_key(fresh.kid, seal(pem, encryption_key))
        data = await tables.first_key()
        if data is None:  # pragma: no cover - the insert above cannot vanish
            raise RuntimeError("push: could not store the generated signing key")
        logger.info("push: generated a new signing key and stored it in the database")
    return SigningKey.from_pem(unseal(data, encryption_key, "push signing key"))
