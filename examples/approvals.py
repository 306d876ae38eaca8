"""A small apcore ApprovalHandler: a policy first, a person (over A2A) second.

Transfers up to ``limit`` cents are approved by policy at once; anything larger parks the
task in ``input-required`` and waits for the caller's ``{"approved": true}`` answer, which
:class:`apcore_a2a.A2AApprovalHandler` records.
"""

from typing import Any

from apcore import ApprovalResult

from apcore_a2a import A2AApprovalHandler


class SmallTransfersApproved(A2AApprovalHandler):
    def __init__(self, limit: int = 10_000) -> None:
        super().__init__()
        self.limit = limit

    async def request_approval(self, request: Any) -> ApprovalResult:
        amount = request.arguments.get("amount")
        if isinstance(amount, int | float) and 0 < amount <= self.limit:
            return ApprovalResult(
                status="approved",
                approved_by="policy:small-transfer",
                reason=f"{amount} cents is within the {self.limit} cent limit",
            )
        result: ApprovalResult = await super().request_approval(request)
        return ApprovalResult(
            status=result.status,
            approval_id=result.approval_id,
            reason=f"transfers over {self.limit} cents need a person to approve",
        )
