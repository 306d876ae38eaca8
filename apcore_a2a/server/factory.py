"""``A2AServerFactory``: the one place that wires the pieces into a Starlette app.

registry/executor -> skill catalog -> card -> SDK ``DefaultRequestHandler`` with our
``ApCoreAgentExecutor`` and request-context builder -> SDK route factories (card, JSON-RPC
1.0+0.3, REST 1.0+0.3) -> request guard (+ auth, CORS) -> app with a lifespan that
starts and stops stores and background work.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.types import AgentCard
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from apcore_a2a.adapters.agent_card import AgentCardBuilder, Binding, CardDocument
from apcore_a2a.auth import (
    acl_card_document,
    authenticator_from_settings,
    extended_card_modifier,
    legacy_extended_card_route,
    security_for,
    security_middleware,
)
from apcore_a2a.push import build_push
from apcore_a2a.push import card_extensions as push_card_extensions
from apcore_a2a.server._card_routes import card_routes
from apcore_a2a.server._guards import RequestGuard, StreamCounter, cancel_on_drop
from apcore_a2a.server._rest03 import eager_legacy_streams
from apcore_a2a.server.call_context import ApCoreCallContextBuilder
from apcore_a2a.server.catalog import SkillCatalog
from apcore_a2a.server.executor import ApCoreAgentExecutor
from apcore_a2a.server.handler import ApCoreRequestHandler
from apcore_a2a.server.ops import Operations
from apcore_a2a.server.preflight import Preflight
from apcore_a2a.server.routing import ApCoreRequestContextBuilder, SkillResolver
from apcore_a2a.server.shutdown import drain
from apcore_a2a.settings import Settings
from apcore_a2a.storage import Stores, open_stores

__all__ = ["A2AServerFactory", "ServerState", "default_executor", "resolve_executor"]

logger = logging.getLogger("apcore_a2a.server")

_TASK_STORE_METHODS = ("save", "get", "list", "delete")
_AUTH_METHODS = ("authenticate", "security_schemes")


def default_executor(registry: Any, *, acl: Any = None, execution_timeout: float = 300.0) -> Any:
    """The apcore ``Executor`` we build when given a bare registry.

    Approval-gated modules get the :class:`A2AApprovalHandler` (they park in
    ``input-required`` instead of running unchecked), and apcore's own per-call timeouts
    (30 s by default) are raised to ``execution_timeout`` so that one setting governs.
    """
    from apcore import Config, Executor

    from apcore_a2a.approval import A2AApprovalHandler

    limit_ms = max(1, int(execution_timeout * 1000))
    config = Config(data={"executor": {"default_timeout": limit_ms, "global_timeout": limit_ms}})
    return Executor(registry, acl=acl, config=config, approval_handler=A2AApprovalHandler())


def resolve_executor(obj: Any, *, execution_timeout: float = 300.0) -> tuple[Any, Any]:
    """Return ``(registry, executor)`` for a Registry or an Executor (duck-typed)."""
    if callable(getattr(obj, "call_async", None)) and hasattr(obj, "registry"):
        return obj.registry, obj
    if callable(getattr(obj, "list", None)) and callable(getattr(obj, "get_definition", None)):
        return obj, default_executor(obj, execution_timeout=execution_timeout)
    raise TypeError(
        "Expected an apcore Registry (list, get_definition) or Executor (call_async, registry), "
        f"got {type(obj).__name__}"
    )


def _require(obj: Any, methods: tuple[str, ...], what: str) -> None:
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise TypeError(
            f"{what} object {type(obj).__name__} is missing methods: {', '.join(missing)}"
        )


def _config_value(executor: Any, registry: Any, key: str) -> str | None:
    for owner in (executor, registry):
        config = getattr(owner, "_config", None) or getattr(owner, "config", None)
        getter = getattr(config, "get", None)
        if callable(getter):
            try:
                value = getter(key)
            except Exception:
                value = None
            if value:
                return str(value)
    return None


@dataclass
class ServerState:
    """Live objects of one server, shared with ops endpoints and tests."""

    settings: Settings
    registry: Any
    executor: Any
    catalog: SkillCatalog
    handler: DefaultRequestHandler
    stores: Stores
    streams: StreamCounter
    agent_executor: ApCoreAgentExecutor
    ops: Operations
    started_at: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def card(self) -> AgentCard:
        return self.catalog.snapshot.card

    def document(self) -> CardDocument:
        return self.catalog.snapshot.document


class A2AServerFactory:
    """Build the Starlette app and agent card for an apcore registry or executor.

    Example::

        app, card = A2AServerFactory(registry, name="calc", port=9000).create()

    Keyword arguments are :class:`~apcore_a2a.settings.Settings` fields (they win over
    environment variables), plus ``task_store`` (a URL or a TaskStore object),
    ``auth`` (an ``Authenticator`` object) and ``config`` (the path of an agent YAML file,
    see :mod:`apcore_a2a.config_file`: its values sit below environment variables and
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
        **overrides: Any,
    ) -> None:
        if auth is not None:
            _require(auth, _AUTH_METHODS, "auth")
        if task_store is not None and not isinstance(task_store, str):
            _require(task_store, _TASK_STORE_METHODS, "task_store")
        elif isinstance(task_store, str):
            overrides["task_store"] = task_store
        environ = os.environ if environ is None else environ
        if config is not None:
            from apcore_a2a.config_file import load_config

            if settings is not None:
                raise TypeError("give config= or settings=, not both")
            agent_config = load_config(config)
            settings = agent_config.base()
        self.settings = Settings.resolve(overrides, environ=environ, base=settings)
        if config is not None and registry_or_executor is None:
            sources = agent_config.module_sources(environ=environ)
            registry_or_executor = sources.build_executor(self.settings.execution_timeout)
        self.registry, self.executor = resolve_executor(
            registry_or_executor, execution_timeout=self.settings.execution_timeout
        )
        self.auth = auth if auth is not None else authenticator_from_settings(self.settings)
        self.task_store_object = task_store if not isinstance(task_store, str) else None

    # -- pieces ------------------------------------------------------------------------
    def card_builder(self) -> AgentCardBuilder:
        s = self.settings
        base = s.public_url()
        rpc_url = base + (s.rpc_path if s.rpc_path != "/" else "/")
        bindings = [Binding("JSONRPC", rpc_url), Binding("HTTP+JSON", base)]
        if s.grpc_port is not None:
            bindings.append(Binding("GRPC", _grpc_binding().grpc_address(s)))
        name = (
            s.name or _config_value(self.executor, self.registry, "project.name") or "apcore-agent"
        )
        version = (
            s.version or _config_value(self.executor, self.registry, "project.version") or "0.0.0"
        )
        schemes, requirements = security_for(self.auth)
        return AgentCardBuilder(
            name=name,
            description=s.description,
            version=version,
            bindings=bindings,
            streaming=True,
            push_notifications=s.push_notifications,
            extra_extensions=push_card_extensions(s),
            security_schemes=schemes,
            security_requirements=requirements,
            extended_agent_card=self.auth is not None,
        )

    def create(self) -> tuple[Starlette, AgentCard]:
        """Return ``(app, agent_card)``; raises ``ValueError`` for a registry without modules."""
        s = self.settings
        public_ids = list(self.registry.list())
        if not public_ids:
            raise ValueError("The apcore registry has no modules; nothing to serve")
        catalog = SkillCatalog(self.registry, self.card_builder())
        if not catalog.ids():
            raise ValueError("No module has a description; nothing to publish as a skill")
        if s.default_skill and catalog.get(s.default_skill) is None:
            raise ValueError(f"default_skill {s.default_skill!r} is not a served skill")

        stores = open_stores(self.task_store_object or s.task_store, s)
        ops = Operations(s)
        agent_executor = ApCoreAgentExecutor(self.executor, s, ops.observers)
        resolver = SkillResolver(catalog, s.default_skill)

        push = (
            build_push(
                s,
                config_store=stores.push_config_store,
                agent_url=s.public_url(),
                engine=stores.engine,
            )
            if s.push_notifications
            else None
        )

        async def lookup(task_id: str, context: Any) -> Any:
            return await stores.get_task(task_id, context)

        handler = ApCoreRequestHandler(
            task_lookup=lookup,
            agent_executor=agent_executor,
            task_store=stores.task_store,
            agent_card=catalog.snapshot.card,
            push_config_store=push.config_store if push else stores.push_config_store,
            push_sender=push.sender if push else None,
            push_url_validator=push.url_validator if push else None,
            request_context_builder=ApCoreRequestContextBuilder(
                resolver, lookup, Preflight(self.registry, self.executor)
            ),
            event_stream=stores.event_stream,
            extended_agent_card=catalog.snapshot.card if self.auth is not None else None,
            extended_card_modifier=(
                extended_card_modifier(self.executor, lambda: catalog.snapshot.card)
                if self.auth is not None
                else None
            ),
        )
        streams = StreamCounter()
        state = ServerState(
            settings=s,
            registry=self.registry,
            executor=self.executor,
            catalog=catalog,
            handler=handler,
            stores=stores,
            streams=streams,
            agent_executor=agent_executor,
            ops=ops,
        )
        ops.attach(state)
        if s.grpc_port is not None:
            state.extras["grpc"] = _grpc_binding().GrpcServer(handler, s, authenticator=self.auth)
        context_builder = ApCoreCallContextBuilder()
        routes: list[BaseRoute] = [
            *ops.routes(),
            *card_routes(acl_card_document(self.executor, state.document)),
            *create_jsonrpc_routes(
                handler,
                rpc_url=s.rpc_path,
                context_builder=context_builder,
                enable_v0_3_compat=True,
                shutdown_grace_period=_stream_grace(s),
            ),
        ]
        if push is not None:
            routes += push.routes
            state.extras["push"] = push
        if self.auth is not None:
            routes.append(legacy_extended_card_route(handler, context_builder))
        if s.explorer:
            from apcore_a2a.explorer import explorer_routes

            routes += explorer_routes(s.explorer_prefix)
        # REST last: its "/{tenant}" mount would otherwise swallow the routes above.
        routes += eager_legacy_streams(
            create_rest_routes(
                handler,
                context_builder=context_builder,
                enable_v0_3_compat=True,
                shutdown_grace_period=_stream_grace(s),
            )
        )
        middleware = [
            *ops.middleware(),
            *security_middleware(s, self.auth),
            Middleware(
                RequestGuard,
                rpc_path=s.rpc_path,
                max_body_bytes=s.max_body_bytes,
                max_streams=s.max_streams,
                streams=streams,
                on_stream_dropped=(
                    cancel_on_drop(handler, context_builder) if s.cancel_on_disconnect else None
                ),
            ),
        ]
        if push is not None:
            middleware += push.middleware
        app = Starlette(routes=routes, middleware=middleware, lifespan=_lifespan(state))
        app.state.a2a = state
        return app, catalog.snapshot.card


def _stream_grace(settings: Settings) -> float:
    # sse-starlette ends every open stream as soon as uvicorn begins to stop; the grace
    # keeps them open until the drain has finished or canceled their tasks.
    return settings.shutdown_timeout + 1.0


def _grpc_binding() -> Any:
    """The gRPC binding module, or a ``RuntimeError`` naming the extra when grpcio is missing."""
    try:
        from apcore_a2a.server import grpc as binding
    except ImportError as exc:
        raise RuntimeError(str(exc)) from exc
    return binding


def _lifespan(state: ServerState) -> Callable[[Starlette], Any]:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import asyncio
        import gc
        import time

        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(
            max_workers=state.settings.sync_workers, thread_name_prefix="apcore-a2a"
        )
        # apcore runs sync modules on the loop's default executor; size it on purpose, and
        # give the host loop its previous executor back on shutdown (embedded apps).
        previous_pool = getattr(loop, "_default_executor", None)
        loop.set_default_executor(pool)
        state.started_at = time.time()
        await state.stores.start()
        push = state.extras.get("push")
        if push is not None:
            await push.start()
        grpc_server = state.extras.get("grpc")
        if grpc_server is not None:
            await grpc_server.start()
        state.catalog.watch()
        # What exists now (modules, schemas, SDK, card) lives as long as the server. Frozen,
        # the cyclic GC stops re-scanning it in every full collection, which otherwise
        # costs a few hundred µs per request (see benchmarks/RESULTS.md). No collect()
        # first: it would add ~70 ms to every start to free a few kB.
        gc.freeze()
        try:
            yield
        finally:
            state.catalog.unwatch()
            # Runs again (within the same deadline) if serve() already drained on SIGTERM.
            await drain(state, state.settings.shutdown_timeout)
            if grpc_server is not None:
                await grpc_server.stop()
            await state.handler.aclose()
            if push is not None:
                await push.aclose()
            await state.ops.aclose()
            await state.stores.aclose()
            if getattr(loop, "_default_executor", None) is pool:
                if previous_pool is not None:
                    loop.set_default_executor(previous_pool)
                else:
                    loop._default_executor = None  # type: ignore[attr-defined]
            pool.shutdown(wait=False, cancel_futures=True)
            gc.unfreeze()  # let this app's own cycles be collected once it is gone

    return lifespan
