"""The apcore ``Executor`` an agent runs modules through, and apcore's governance honoured
by the agent that serves its modules (docs/auth.md).

* **The executor**: used as given (also an ``APCore`` client's), or built over a bare
  registry (:func:`default_executor`).
* **Approvals**: a given ``Executor`` without an approval handler gets an
  :class:`~apcore_a2a.approval.A2AApprovalHandler`, so a module that requires approval
  asks the caller instead of running unasked.
* **The control plane**: apcore's ``system.*`` modules are served only when named
  (``system_modules``); a control module (``system.control.*``) only behind
  authentication, to the operator role, under apcore's approval gate.

What cannot be served stops the agent at start with one line (:func:`check_served`), all
read through apcore's public API (``governance_state()``, the strategy's steps).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from apcore.schema import governance_union

from apcore_a2a.adapters.skills import CONTROL_PREFIX, SYSTEM_PREFIX
from apcore_a2a.approval import A2AApprovalHandler
from apcore_a2a.execution.identity import OPERATOR_ROLE
from apcore_a2a.settings import SettingsError
from apcore_a2a.upstream.apcore_schema_cache import LookupRegistry, cache_schemas, registry_of

logger = logging.getLogger("apcore_a2a")


def default_executor(
    registry: Any, *, acl: Any = None, config: Any = None, execution_timeout: float = 300.0
) -> Any:
    """The apcore ``Executor`` we build over *registry*: with our approval handler, toggles
    of its own (nothing process-wide) and cached schemas. Without a *config* of the user's,
    apcore's per-call timeouts (30 s by default) become *execution_timeout*, so that one
    setting governs; with one, its ``sys_modules`` are registered as ``APCore(config)`` would.
    """
    from apcore import Config, Executor, ToggleState, register_sys_modules

    if config is None:
        limit_ms = max(1, int(execution_timeout * 1000))
        config = Config(
            data={"executor": {"default_timeout": limit_ms, "global_timeout": limit_ms}}
        )
    toggles = ToggleState()
    handler = A2AApprovalHandler()
    executor = Executor(
        LookupRegistry(registry),
        acl=acl,
        config=config,
        approval_handler=handler,
        toggle_state=toggles,
    )
    if config.get("sys_modules.enabled", False):
        register_sys_modules(registry, executor, config, toggle_state=toggles)
    return cache_schemas(executor)


def resolve_executor(obj: Any, *, execution_timeout: float = 300.0) -> tuple[Any, Any]:
    """Return ``(registry, executor)`` for a Registry, an Executor (duck-typed) or an
    ``APCore`` client (its executor). An apcore Executor without an approval handler gets
    ours (:func:`ensure_approvals`)."""
    from apcore import APCore

    if isinstance(obj, APCore):
        obj = obj.executor
    if callable(getattr(obj, "call_async", None)) and hasattr(obj, "registry"):
        ensure_approvals(obj)
        return registry_of(obj), obj
    if callable(getattr(obj, "list", None)) and callable(getattr(obj, "get_definition", None)):
        return obj, default_executor(obj, execution_timeout=execution_timeout)
    raise TypeError(
        "Expected an apcore Registry (list, get_definition) or Executor (call_async, registry), "
        f"got {type(obj).__name__}"
    )


def _requires_approval(registry: Any, module_id: str) -> bool:
    """apcore's own rule (what its approval gate reads): the module's or the declared."""
    own = getattr(registry.get(module_id), "annotations", None)
    found = governance_union(own, registry.get_declared_annotations(module_id))
    return bool(getattr(found, "requires_approval", False))


def ensure_approvals(executor: Any) -> None:
    """Give an apcore *executor* whose approval gate has no handler ours (said once)."""
    if not callable(getattr(executor, "governance_state", None)):
        return  # not an apcore Executor: nothing of apcore's to honour
    state = executor.governance_state()
    if state.builtin_approval_gate_wired and not (
        state.approval_handler_configured or state.policy_strict
    ):
        executor.set_approval_handler(A2AApprovalHandler())
        logger.warning(
            "The apcore Executor given has no approval handler: apcore-a2a gives it an "
            "A2AApprovalHandler, so a module that requires approval asks the caller "
            "(input-required) instead of running unasked"
        )


def check_served(
    executor: Any,
    registry: Any,
    served: Collection[str],
    system_modules: Collection[str],
    *,
    authenticated: bool,
    cluster: bool = False,
) -> Callable[[str], str | None] | None:
    """Refuse (``SettingsError``, one line) to serve what apcore's governance does not
    cover: a named system module that is not a registered ``system.*`` one; a control
    module without authentication, in *cluster* mode (it would change one process of
    several), or without apcore's approval gate over the control plane
    (``governance_state()``); any *served* module that requires approval, on an
    executor whose strategy has no approval gate. Returns why a module registered later
    may not be published (one that requires approval, on such an executor), if any can't."""
    registered = [m for m in registry.list() if m.startswith(SYSTEM_PREFIX)]
    for name in system_modules:
        if not name.startswith(SYSTEM_PREFIX):
            raise SettingsError(
                f"system_modules: {name!r} is not one of apcore's system modules (system.*); "
                "other modules are served without naming them"
            )
        if name not in registered:
            have = ", ".join(registered) or "none (apcore registers them with sys_modules.enabled)"
            raise SettingsError(
                f"system_modules: {name!r} is not registered; registered system modules: {have}"
            )
    hidden = [m for m in registered if m not in system_modules]
    if hidden:
        logger.info(
            "Not serving apcore's system modules %s (name them in system_modules to serve them)",
            ", ".join(hidden),
        )
    if not callable(getattr(executor, "governance_state", None)):
        return None
    state = executor.governance_state()
    control = sorted(n for n in system_modules if n.startswith(CONTROL_PREFIX))
    if control:
        first = f"system_modules: {control[0]} is one of apcore's control modules"
        if not authenticated:
            raise SettingsError(
                f"{first}: it is served only with authentication (auth_key, auth_jwks_url or "
                f"api_keys), to callers with the {OPERATOR_ROLE!r} role"
            )
        if cluster:
            raise SettingsError(
                f"{first}: it changes only the process that runs it (apcore keeps toggles, "
                "config and modules in its memory), and in cluster mode other processes "
                "serve the same agent: refusing to serve it"
            )
        if state.unprotected_control_surface or not (
            state.builtin_approval_gate_wired and state.all_control_modules_require_approval
        ):
            raise SettingsError(
                f"{first}, and apcore's approval gate does not protect the control plane "
                f"(governance_state(): unprotected_control_surface "
                f"{state.unprotected_control_surface}, approval gate wired "
                f"{state.builtin_approval_gate_wired}): refusing to serve it"
            )
    if not state.builtin_approval_gate_wired:
        gated = sorted(m for m in served if _requires_approval(registry, m))
        if gated:
            raise SettingsError(
                f"{', '.join(gated[:5])} require approval, and the strategy of the apcore "
                "Executor given has no approval gate: serve them with apcore's approval_gate "
                "step (the standard strategy has it) so they never run unasked"
            )
        why = "it requires approval, and the strategy of the apcore Executor given has no gate"
        return lambda m: why if _requires_approval(registry, m) else None
    return None
