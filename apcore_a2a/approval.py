"""An apcore ``ApprovalHandler`` whose decisions come from A2A follow-up messages."""

from __future__ import annotations

import threading
import uuid

from apcore import ApprovalRequest, ApprovalResult
from cachetools import LRUCache

#: ``Context.data`` key of the approval a run resumes for a call its module makes:
#: ``{"approvalId", "moduleId"}`` (apcore passes only the top-level call's token)
APPROVED_KEY = "a2a.approval"


class A2AApprovalHandler:
    """apcore approval handler backed by decisions recorded from A2A messages.

    Use it when the person calling the agent is the one who approves::

        executor = Executor(registry, approval_handler=A2AApprovalHandler())

    A module that requires approval then parks its task in ``input-required``; the caller
    answers with ``{"approved": true}`` (or ``false`` with a reason) on the same task, and
    the module runs (or the task ends ``rejected``). Decisions are remembered for the last
    *max_entries* approvals. A decision is used once and an unknown id is rejected, so an
    approval id cannot be replayed to run a module again; the run that used it may still
    call the module it was asked for (:data:`APPROVED_KEY`: the skill's own approval gate
    and the module it calls may both read it).
    """

    def __init__(self, *, max_entries: int = 10_000) -> None:
        self._decisions: LRUCache[str, tuple[str, str | None]] = LRUCache(max_entries)
        self._used: LRUCache[str, tuple[str, str | None]] = LRUCache(max_entries)
        self._lock = threading.Lock()

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResult:
        """Park the call: ``pending``, under a new approval id the caller answers; a call
        of a module that the run resuming its approval (:data:`APPROVED_KEY`) makes is
        decided by that approval."""
        data = getattr(request.context, "data", None)
        grant = data.get(APPROVED_KEY) if isinstance(data, dict) else None
        if isinstance(grant, dict) and grant.get("moduleId") == request.module_id:
            approval_id = str(grant.get("approvalId"))
            with self._lock:  # used already by the run's own call (a skill gated too)?
                used = self._used.get(approval_id)
            if used is None:
                return await self.check_approval(approval_id)
            return ApprovalResult(status=used[0], approval_id=approval_id, reason=used[1])
        approval_id = uuid.uuid4().hex
        with self._lock:
            self._decisions[approval_id] = ("pending", None)
        reason = request.description or f"{request.module_id} requires approval"
        return ApprovalResult(status="pending", approval_id=approval_id, reason=reason)

    async def check_approval(self, approval_id: str) -> ApprovalResult:
        """The caller's decision on *approval_id*, used once (unknown ids are rejected)."""
        with self._lock:
            entry = self._decisions.get(approval_id)
            if entry is not None and entry[0] != "pending":
                del self._decisions[approval_id]
                self._used[approval_id] = entry  # for the calls its run makes only
        if entry is None:
            return ApprovalResult(
                status="rejected", approval_id=approval_id, reason="Unknown or expired approval"
            )
        status, reason = entry
        return ApprovalResult(status=status, approval_id=approval_id, reason=reason)

    def record_decision(self, approval_id: str, approved: bool, reason: str | None = None) -> None:
        """Record the caller's answer for *approval_id*."""
        with self._lock:
            self._decisions[approval_id] = ("approved" if approved else "rejected", reason)
