"""apcore's governance, honoured by the agent that serves its modules (docs/auth.md).

* **Approvals.** An ``Executor`` handed in without an approval handler gets an
  :class:`~apcore_a2a.approval.A2AApprovalHandler` (said once, in the log), so a module that
  requires approval asks the caller instead of running unasked; one whose strategy has no
  approval gate at all cannot serve a module that requires approval.
* **The control plane.** apcore's ``system.*`` modules become skills only when the operator
  names them (``system_modules``); a control module (``system.control.*``) only behind
  authentication, for callers with the operator role (:mod:`~apcore_a2a.execution.identity`),
  and with apcore's approval gate over every control module, as ``governance_state()``
  reports it.

What cannot be served stops the agent at start with one line (:func:`check_served`).
All of it is read and set through apcore's public API: ``governance_state()``, the
strategy's approval gate step and its ``handler``, ``set_approval_handler()``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from apcore.builtin_steps import BuiltinApprovalGate

from apcore_a2a.adapters.skills import CONTROL_PREFIX, SYSTEM_PREFIX
from apcore_a2a.approval import A2AApprovalHandler
from apcore_a2a.execution.identity import OPERATOR_ROLE
from apcore_a2a.settings import SettingsError

logger = logging.getLogger("apcore_a2a")


def approval_handler_of(executor: Any) -> Any:
    """The approval handler *executor*'s approval gate consults, if any."""
    steps = getattr(getattr(executor, "current_strategy", None), "steps", ())
    gates = (s.handler for s in steps if isinstance(s, BuiltinApprovalGate))
    return next((handler for handler in gates if handler is not None), None)


def _requires_approval(registry: Any, module_id: str) -> bool:
    declared = getattr(registry.get_definition(module_id), "annotations", None)
    own = getattr(registry.get(module_id), "annotations", None)
    for found in (declared, own):
        flag = found.get("requires_approval") if isinstance(found, Mapping) else None
        if flag is True or getattr(found, "requires_approval", False) is True:
            return True
    return False


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
) -> None:
    """Refuse (``SettingsError``, one line) to serve what apcore's governance does not
    cover: a named system module that is not a registered ``system.*`` one; a control
    module without authentication or without apcore's approval gate over the control
    plane (``governance_state()``); any *served* module that requires approval, on an
    executor whose strategy has no approval gate."""
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
        return
    state = executor.governance_state()
    control = sorted(n for n in system_modules if n.startswith(CONTROL_PREFIX))
    if control:
        first = f"system_modules: {control[0]} is one of apcore's control modules"
        if not authenticated:
            raise SettingsError(
                f"{first}: it is served only with authentication (auth_key, auth_jwks_url or "
                f"api_keys), to callers with the {OPERATOR_ROLE!r} role"
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
