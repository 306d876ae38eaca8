"""The apcore ``Context`` one module call runs with, built from the A2A request."""

from __future__ import annotations

import logging
import time
from typing import Any

from a2a.server.agent_execution import RequestContext
from apcore import CancelToken, Context, TraceContext
from google.protobuf.json_format import MessageToDict

from apcore_a2a.adapters.errors import clean_for_log
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.execution.identity import identity_of

__all__ = ["apcore_context_for"]

logger = logging.getLogger("apcore_a2a.executor")


def apcore_context_for(
    context: RequestContext, spec: SkillSpec, token: CancelToken, timeout: float
) -> Any:
    """Identity, W3C trace parent, cancel token, deadline and the ``a2a.*`` facts."""
    call_context = context.call_context
    headers = call_context.state.get("headers") if call_context is not None else None
    trace_parent = None
    if headers and "traceparent" in headers:
        try:
            trace_parent = TraceContext.extract(headers)
        except Exception:
            logger.debug("Ignoring malformed traceparent %s", clean_for_log(headers))
    message = context.message
    data: dict[str, Any] = {
        "a2a.task_id": context.task_id,
        "a2a.context_id": context.context_id,
        "a2a.message_id": message.message_id if message is not None else None,
        "a2a.skill_id": spec.module_id,
    }
    if message is not None and message.HasField("metadata"):
        data["a2a.message_metadata"] = MessageToDict(message.metadata)
    if context.metadata:
        data["a2a.request_metadata"] = context.metadata
    return Context.create(
        identity=identity_of(call_context),
        trace_parent=trace_parent,
        cancel_token=token,
        data=data,
        global_deadline=time.time() + timeout,
    )
