"""``A2AServerFactory``: the one place that wires the pieces into a Starlette app.

registry/executor -> skill catalog -> card -> SDK ``DefaultRequestHandler`` with our
``ApCoreAgentExecutor`` and request-context builder -> SDK route factories (card, JSON-RPC
1.0+0.3, REST 1.0+0.3) -> request guard (+ auth, CORS) -> app with a lifespan that
starts and stops stores and background work.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from a2a.types import AgentCard
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from apcore_a2a._settings_refusals import check_named
from apcore_a2a.adapters.agent_card import AgentCardBuilder, Binding
from apcore_a2a.auth import (
    Authenticator,
    acl_card_document,
    authenticator_from_settings,
    extended_card_modifier,
    legacy_extended_card_route,
    security_for,
    security_middleware,
)
from apcore_a2a.classify import JWKS_PATH, hidden_routes, layered
from apcore_a2a.errors import MissingExtraError, WeakKeyError
from apcore_a2a.execution.catalog import SkillCatalog
from apcore_a2a.execution.executor import ApCoreAgentExecutor
from apcore_a2a.execution.governance import check_served, resolve_executor
from apcore_a2a.execution.routing import ApCoreRequestContextBuilder
from apcore_a2a.ops.operations import Operations
from apcore_a2a.ops.stream_ends import StreamEnds
from apcore_a2a.push import build_push, jwks_route
from apcore_a2a.push import card_extensions as push_card_extensions
from apcore_a2a.server.body_deadline import BodyDeadline
from apcore_a2a.server.caller_keys import CallerKeys
from apcore_a2a.server.card_routes import CardBase, card_routes
from apcore_a2a.server.guards import RequestGuard
from apcore_a2a.server.handler import ApCoreRequestHandler
from apcore_a2a.server.lifecycle import (
    AUTH,
    EDGE,
    GUARD,
    INNER,
    OBSERVE,
    Feature,
    Lifecycle,
    ServerState,
    StartOnFirstRequest,
    host_feature,
    middleware_stack,
)
from apcore_a2a.server.limits import StreamLimiter
from apcore_a2a.server.routes import ApCoreCallContextBuilder, a2a_routes
from apcore_a2a.server.task_quota import TaskQuota
from apcore_a2a.server.unrouted import AgentRoot, agent_app
from apcore_a2a.settings import SettingRefusal, Settings, SettingsError, config_path
from apcore_a2a.shape import Shape
from apcore_a2a.storage import open_stores
from apcore_a2a.storage._urls import parse_store_url
from apcore_a2a.storage.followers import StreamFollowers
from apcore_a2a.streams.answers import AnswerSide, StreamDrops
from apcore_a2a.upstream import failed_saves, sdk_request_logs
from apcore_a2a.upstream.apcore_accessors import config_of

logger = logging.getLogger("apcore_a2a.server")

_TASK_STORE_METHODS = ("save", "get", "list", "delete")
_AUTH_METHODS = ("authenticate", "security_schemes")


class A2AServerFactory:
    """Build the Starlette app and agent card for an apcore registry or executor.

    Example::

        app, card = A2AServerFactory(registry, name="calc", port=9000).create()

    Keyword arguments are :class:`~apcore_a2a.settings.Settings` fields (they win over
    environment variables), plus ``task_store`` (a URL or a TaskStore object),
    ``auth`` (an ``Authenticator`` object) and ``config`` (the path of an agent YAML file,
    see :mod:`apcore_a2a.config`: its values sit below environment variables and
    keyword arguments, and without a registry its module sources are loaded).
    """

    def __init__(
        self,
        registry_or_executor: Any = None,
        *,
        config: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        environ: Mapping[str, str] | None = None,
        auth: Any = None,
        task_store: Any = None,
        standalone: bool = False,
        **overrides: Any,
    ) -> None:
        if auth is not None:
            _require_methods(auth, _AUTH_METHODS, "auth")
        if isinstance(task_store, str):
            overrides["task_store"], task_store = task_store, None
        elif task_store is not None:
            _require_methods(task_store, _TASK_STORE_METHODS, "task_store")
        environ = os.environ if environ is None else environ
        if config is None:
            config = config_path(environ)
        if config is not None:
            from apcore_a2a.config import load_config

            if settings is not None:
                raise TypeError("give config= or settings=, not both")
            base: Settings | Mapping[str, Any] | None = load_config(config).values
        else:
            base = settings
        self.settings = Settings.resolve(overrides, environ=environ, base=base)
        where = Settings.namer(overrides, environ, settings)
        if self.settings.explorer:  # a prefix over the agent's routes, named where it came from
            check = _hides_no_route(self.settings.rpc_path)
            check_named(self.settings, "explorer_prefix", check, where)
        if task_store is None:  # a URL no store takes, named where it came from
            check_named(self.settings, "task_store", parse_store_url, where)
        self.registry, self.executor = _executor_for(registry_or_executor, self.settings)
        self.auth = auth if auth is not None else _authenticator(self.settings, where)
        self.task_store_object = task_store
        #: served by serve() or the CLI (which own the process): process_tuning defaults on
        self.standalone = standalone

    def card_builder(self) -> AgentCardBuilder:
        s = self.settings
        base = s.public_url()
        bindings = [Binding("JSONRPC", base + s.rpc_path), Binding("HTTP+JSON", base)]
        if s.grpc_port is not None:
            bindings.append(Binding("GRPC", _grpc_binding().grpc_address(s)))
        name = s.name or _config_value(self.executor, self.registry, "project.name")
        version = s.version or _config_value(self.executor, self.registry, "project.version")
        schemes, requirements = security_for(self.auth)
        return AgentCardBuilder(
            name=name or "apcore-agent",
            description=s.description,
            version=version or "0.0.0",
            bindings=bindings,
            streaming=s.streaming,
            push_notifications=s.push_notifications,
            extra_extensions=push_card_extensions(s),
            security_schemes=schemes,
            security_requirements=requirements,
            extended_agent_card=self.auth is not None,
        )

    def create(self) -> tuple[Starlette, AgentCard]:
        """Return ``(app, agent_card)``; raises ``ValueError`` for a registry without modules."""
        s = self.settings
        if not list(self.registry.list()):
            raise ValueError("The apcore registry has no modules; nothing to serve")
        catalog = SkillCatalog(self.registry, self.card_builder(), s.system_modules)
        if not catalog.ids():
            raise ValueError("No module has a description; nothing to publish as a skill")
        catalog.unservable = check_served(
            self.executor,
            self.registry,
            catalog.ids(),
            s.system_modules,
            authenticated=self.auth is not None,
            cluster=s.cluster,
        )
        if s.default_skill and catalog.get(s.default_skill) is None:
            raise ValueError(f"default_skill {s.default_skill!r} is not a served skill")

        signer = None
        if s.card_signing or s.card_signing_key:  # else PyJWT and cryptography stay unloaded
            from apcore_a2a.keys import card_signer_from_settings

            signer = card_signer_from_settings(s)
        store = self.task_store_object
        stores = open_stores(s.task_store if store is None else store, s)
        ops = Operations(s)
        agent_executor = ApCoreAgentExecutor(self.executor, s, ops.observers)
        stores.watch_cancels(agent_executor.running_task_ids, agent_executor.stop_unsavable)
        if agent_executor.stored_working is not None:
            agent_executor.stored_working.follow(stores.on_save, stores.turns.standing)
        card_base = CardBase(s.public_url(), fixed=bool(s.url))
        push = (
            build_push(
                s,
                config_store=stores.push_config_store,
                agent_url=card_base.url,
                engine=stores.engine,
                slots=stores.quota_slots,
            )
            if s.push_notifications
            else None
        )
        modifier = card_base.modifier(
            extended_card_modifier(self.executor, lambda: catalog.snapshot.card)
            if self.auth is not None
            else None
        )
        if signer is not None and modifier is not None:
            modifier = signer.extended_modifier(modifier)
        quota = TaskQuota(s.max_unfinished_tasks_per_caller, stores.quota_slots)
        if push:
            stores.on_save(push.saved)
            stores.on_forget(push.forgotten)  # another's records never push out a task's
            stores.purge_with(*push.statuses.tables)
            stores.on_interrupted(push.interrupted)
        if quota.limit:
            stores.on_save(quota.saved)
        handler = ApCoreRequestHandler(
            stores=stores,
            quota=quota,
            agent_executor=agent_executor,
            agent_card=catalog.snapshot.card,
            push_config_store=push.config_store if push else stores.push_config_store,
            push_sender=push.sender if push else None,
            push_url_check=push.url_check if push else None,
            request_context_builder=ApCoreRequestContextBuilder(
                catalog,
                stores.get_task,
                self.registry,
                self.executor,
                s.default_skill,
                s.route_by_schema,
            ),
            settings=s,
            extended_agent_card=catalog.snapshot.card if self.auth is not None else None,
            extended_card_modifier=modifier,
        )
        streams = StreamLimiter(s.max_streams, s.max_streams_per_caller, stores.quota_slots)
        state = ServerState(
            settings=s,
            executor=self.executor,
            catalog=catalog,
            handler=handler,
            stores=stores,
            streams=streams,
            agent_executor=agent_executor,
            ops=ops,
        )
        ops.attach(state)
        context_builder = ApCoreCallContextBuilder(CallerKeys.of(s, self.auth is not None))
        slots = stores.quota_slots  # cluster mode: streams on other replicas count too
        followers = StreamFollowers(slots) if slots is not None else None
        drops = StreamDrops(handler, agent_executor, followers) if s.cancel_on_disconnect else None
        features = _optional_features(state, self.auth, push, signer, context_builder, drops)
        rpc_routes, rest_routes = a2a_routes(handler, s.rpc_path, context_builder, float("inf"))
        # Rebased onto where the caller reached us, then signed: the signature covers the
        # URLs the caller is given.
        card_source = card_base.document(
            acl_card_document(self.executor, lambda: catalog.snapshot.document)
        )
        if signer is not None:
            card_source = signer.documents(card_source)
        served: list[BaseRoute] = [
            *card_routes(card_source),
            *rpc_routes,
            *(route for feature in features for route in feature.routes),
            *rest_routes,
        ]
        keys = context_builder.caller_keys  # one for every binding: the gRPC port's too
        guard = Middleware(
            RequestGuard, max_body_bytes=s.max_body_bytes, streams=streams, caller_keys=keys
        )
        # drops: one count of each task's streams for the answer side of all routes and gRPC
        answers = Middleware(AnswerSide, drops=drops, context_builder=context_builder)
        edge, per_route = middleware_stack(features, [(GUARD, guard), (GUARD, answers)])
        # Every route runs the request record, auth, the guard... once it matched: no
        # spelling of a path reaches an endpoint around them (see apcore_a2a.classify).
        shape = Shape.of(s)
        explorer = s.explorer_prefix if s.explorer else None
        routes = layered(
            served, per_route, rpc_path=s.rpc_path, explorer_prefix=explorer, shape=shape
        )
        tuning = s.process_tuning if s.process_tuning is not None else self.standalone
        lifecycle = Lifecycle(state, features, tuning=tuning, own_server=not self.standalone)
        middleware = [
            Middleware(AgentRoot),
            Middleware(StartOnFirstRequest, lifecycle=lifecycle),
            *edge,
        ]
        if s.body_timeout:  # outermost: one deadline for every route's body
            middleware.insert(0, Middleware(BodyDeadline, body_timeout=s.body_timeout))
        if not self.standalone:  # streams end after the drain (serve()'s: graceful_server.py)
            middleware.insert(0, Middleware(StreamEnds, hosted=state))
        # Paths read exactly; 404 and 405 on the A2A paths are A2A errors (server/unrouted.py)
        app = agent_app(routes, middleware, lifecycle.lifespan, s.rpc_path, explorer)
        app.state.a2a = state
        state.extras.update({f.name: f.handle for f in features if f.handle is not None})
        return app, catalog.snapshot.card


def _require_methods(obj: Any, methods: tuple[str, ...], what: str) -> None:
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(
            f"{what} object {type(obj).__name__} is missing methods: {', '.join(missing)}"
        )


def _hides_no_route(rpc_path: str) -> Callable[[str], None]:
    """The check of an Explorer prefix for an agent whose JSON-RPC path is *rpc_path*:
    mounted over ``/agent`` or ``/v1`` the Explorer would shadow them or make them public."""

    def check(prefix: str) -> None:
        if hidden := hidden_routes(prefix, rpc_path):
            raise ValueError(
                f"would hide the agent's own route {hidden[0]}; choose another, got {prefix!r}"
            )

    return check


def _authenticator(settings: Settings, where: Callable[[str], str]) -> Authenticator | None:
    """The settings' authenticator; a JWT secret too short for its algorithms named as
    the flag, variable, config key or settings object it came from (*where*)."""
    try:
        return authenticator_from_settings(settings)
    except WeakKeyError as exc:
        raise SettingsError(f"{where('auth_key')}: {exc}") from None
    except SettingRefusal as exc:
        raise SettingsError(f"{where(exc.name)}: {exc.detail}") from None


def _executor_for(obj: Any, settings: Settings) -> tuple[Any, Any]:
    """``(registry, executor)``: the caller's, or built from the settings' module sources;
    settings for an executor we build are refused, not ignored, when the caller brings one."""
    from apcore_a2a.config import ModuleSources

    sources = ModuleSources.from_settings(settings)
    timeout = settings.execution_timeout
    if obj is None:
        return resolve_executor(sources.build_executor(timeout), execution_timeout=timeout)
    if sources.given:
        raise ValueError(
            "extensions_dirs / bindings_dirs build a registry; they cannot be combined "
            "with the registry or executor you passed"
        )
    registry, executor = resolve_executor(obj, execution_timeout=timeout)
    if executor is obj and (settings.acl or settings.apcore_config):
        raise ValueError(
            "acl / apcore_config configure the executor apcore-a2a builds; set them on "
            "your own Executor instead"
        )
    if settings.acl or settings.apcore_config:
        executor = sources.build_executor_for(registry, timeout)
    return registry, executor


def _config_value(executor: Any, registry: Any, key: str) -> str | None:
    for owner in (executor, registry):
        getter = getattr(config_of(owner), "get", None)
        if callable(getter):
            try:
                value = getter(key)
            except Exception:
                value = None
            if value:
                return str(value)
    return None


def _optional_features(
    state: ServerState,
    authenticator: Any,
    push: Any,
    signer: Any,
    context_builder: ApCoreCallContextBuilder,
    drops: StreamDrops | None,
) -> list[Feature]:
    """The optional parts the settings ask for, in start order."""
    s, ops = state.settings, state.ops
    found: list[Feature | None] = [
        Feature("sdk-request-logs", start=sdk_request_logs.attach, stop=sdk_request_logs.detach),
        Feature("failed-saves", start=failed_saves.attach, stop=failed_saves.detach),
        host_feature(s),
        Feature(
            "operations", routes=ops.routes(), middleware=[(OBSERVE, m) for m in ops.middleware()]
        ),
    ]
    cors, auth = security_middleware(s, authenticator)
    if cors is not None:
        found.append(Feature("cors", middleware=[(EDGE, cors)]))
    if auth is not None:
        found.append(
            Feature(
                "auth",
                routes=[legacy_extended_card_route(state.handler, context_builder)],
                middleware=[(AUTH, auth)],
                # Ends a JWKS fetch in flight; drain() calls it first (see ops.shutdown).
                stop=getattr(authenticator, "aclose", None),
                handle=authenticator,
            )
        )
    if signer is not None:
        # Signed cards: the key is loaded at start; the JWKS route has every key.
        sources = [signer.public_jwk] + ([push.public_jwk] if push is not None else [])
        found.append(
            Feature(
                "card-signing",
                routes=[jwks_route(sources)],
                start=functools.partial(signer.start, state.stores.engine),
                handle=signer,
            )
        )
    if push is not None:
        routes = push.routes_for(state.handler, context_builder)
        found.append(
            Feature(
                "push",
                # With card signing one key set serves both keys (the card-signing one's).
                routes=[r for r in routes if signer is None or getattr(r, "path", "") != JWKS_PATH],
                middleware=[(INNER, m) for m in push.middleware],
                start=push.start,
                stop=push.aclose,
                handle=push,
            )
        )
    if s.grpc_port is not None:
        server = _grpc_binding().GrpcServer(
            state.handler,
            s,
            authenticator=authenticator,
            streams=state.streams,
            operations=ops,
            drops=drops,
            caller_keys=context_builder.caller_keys,
        )
        found.append(Feature("grpc", start=server.start, stop=server.stop, handle=server))
    if s.explorer:
        from apcore_a2a.explorer import explorer_routes

        found.append(Feature("explorer", routes=explorer_routes(s.explorer_prefix)))
    return [f for f in found if f is not None]


def _grpc_binding() -> Any:
    """The gRPC binding module; ``MissingExtraError`` naming the extra when grpcio is missing."""
    try:
        from apcore_a2a.server import grpc as binding
    except ImportError as exc:
        raise MissingExtraError(str(exc)) from exc
    return binding
