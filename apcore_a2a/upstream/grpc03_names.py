"""The resource names of 0.3 gRPC calls, checked whole before the SDK reads them: a name
that is not ``tasks/{id}`` (``GetTask``, ``CancelTask``, ``TaskSubscription``, a push
config's ``parent``) or ``tasks/{id}/pushNotificationConfigs/{configId}`` (a push config's
``name``) is ``INVALID_ARGUMENT`` saying which field, the form it must have and the name given.

a2a-sdk 1.3's 0.3 servicer (``CompatGrpcHandler``) matches names by prefix and refuses
the rest as "No task for <name>" or "Bad resource name <name>": an empty ``parent`` (the
0.3 ``CreateTaskPushNotificationConfig`` as most clients send it) was a bare "No task
for", and ``tasks/a/b`` was served as task ``a``.

A get by task id alone (``pushNotificationConfigId`` is optional in 0.3, and JSON-RPC 0.3
answers the config whose id defaulted to the task's: ``jsonrpc03_push.py``) reaches gRPC as
``tasks/{id}/pushNotificationConfigs/``, the name a2a-sdk's 0.3 gRPC client sends for it;
the SDK's servicer refused it as "Bad resource name", so it is read as
``tasks/{id}/pushNotificationConfigs/{id}``.
"""

from __future__ import annotations

import apcore_a2a.upstream.client_first  # noqa: F401  (before the SDK server: see it)

# isort: split
import re
from collections.abc import AsyncIterator
from typing import Any

import grpc.aio
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.utils.errors import InvalidParamsError

from apcore_a2a._text import echoed

TASK = (re.compile(r"tasks/[^/]+"), "tasks/{taskId}")
CONFIG = (
    re.compile(r"tasks/[^/]+/pushNotificationConfigs/[^/]+"),
    "tasks/{taskId}/pushNotificationConfigs/{configId}",
)

#: a get's config name without the config id: the config named by the task
BY_TASK = re.compile(r"tasks/([^/]+)/pushNotificationConfigs/")


def name_error(field: str, value: str, form: tuple[re.Pattern[str], str]) -> str | None:
    """What is wrong with *value*, the request's *field*, unless it has the *form*."""
    if form[0].fullmatch(value):
        return None
    given = f", not {echoed(value, quote=True)}" if value else ", and none was given"
    return f"{field} must be {form[1]}{given}"


def _checked(method: str, field: str, form: tuple[re.Pattern[str], str]) -> Any:
    """The 0.3 servicer's unary *method*, refusing a request whose *field* has not the *form*."""

    async def checked(self: Grpc03Names, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self._named(context, name_error(field, getattr(request, field), form))
        return await getattr(super(Grpc03Names, self), method)(request, context)

    checked.__name__ = checked.__qualname__ = method
    return checked


class Grpc03Names(CompatGrpcHandler):
    """The 0.3 servicer, refusing a malformed resource name with a complete message."""

    async def _named(self, context: grpc.aio.ServicerContext, problem: str | None) -> None:
        if problem is not None:
            await self.abort_context(InvalidParamsError(message=problem), context)

    GetTask = _checked("GetTask", "name", TASK)
    CancelTask = _checked("CancelTask", "name", TASK)
    CreateTaskPushNotificationConfig = _checked("CreateTaskPushNotificationConfig", "parent", TASK)
    ListTaskPushNotificationConfig = _checked("ListTaskPushNotificationConfig", "parent", TASK)
    DeleteTaskPushNotificationConfig = _checked("DeleteTaskPushNotificationConfig", "name", CONFIG)

    async def TaskSubscription(
        self, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        await self._named(context, name_error("name", request.name, TASK))
        async for event in super().TaskSubscription(request, context):
            yield event

    async def GetTaskPushNotificationConfig(
        self, request: Any, context: grpc.aio.ServicerContext
    ) -> Any:
        by_task = BY_TASK.fullmatch(request.name)
        if by_task is not None:
            request = type(request)(name=request.name + by_task[1])
        await self._named(context, name_error("name", request.name, CONFIG))
        return await super().GetTaskPushNotificationConfig(request, context)
