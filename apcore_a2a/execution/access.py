"""Who may call which module: the apcore ACL asked without executing anything.

Skill ids are apcore module ids, so "may this caller see or call skill S" is the apcore ACL
question "may this identity call module S". Used by preflight (before a task exists), by the
skill router (which skills a caller may be told about) and by the per-caller cards.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from apcore import Context

if TYPE_CHECKING:
    from apcore import ACL, Executor, Identity

__all__ = ["acl_of", "visible_modules", "visible_modules_async"]


def acl_of(executor: Executor) -> ACL | None:
    """The ACL an apcore ``Executor`` enforces, if any."""
    # apcore 0.32 exposes no public getter; the attribute is what set_acl() writes.
    acl: ACL | None = getattr(executor, "_acl", None)
    return acl


def visible_modules(
    executor: Executor, identity: Identity | None, module_ids: Iterable[str]
) -> set[str]:
    """The modules *identity* (``None`` = anonymous) may call, by the executor's ACL."""
    ids = list(module_ids)
    acl = acl_of(executor)
    if acl is None:
        return set(ids)
    context = Context.create(identity=identity)
    return {m for m in ids if acl.check_access(None, m, context).access == "allow"}


async def visible_modules_async(
    executor: Executor, identity: Identity | None, module_ids: Iterable[str]
) -> set[str]:
    """Like :func:`visible_modules`, also evaluating async ACL conditions."""
    ids = list(module_ids)
    acl = acl_of(executor)
    if acl is None:
        return set(ids)
    context = Context.create(identity=identity)
    allowed: set[str] = set()
    for module_id in ids:
        decision = await acl.async_check_access(None, module_id, context)
        if decision.access == "allow":
            allowed.add(module_id)
    return allowed
