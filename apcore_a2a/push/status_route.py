"""``GET /push/status/{task_id}``: the delivery status of a task's push configs, for their
owner, outside the A2A wire.

A2A's ``TaskPushNotificationConfig`` has no status, and the agent's config answers are
exactly the SDK's (a strict proto-JSON peer rejects members the schema lacks). The status
(:class:`~apcore_a2a.push.status.ConfigStatusBook`) is read here instead: the route passes
the same admission as an A2A call (``classify`` kind ``"push"``: authentication, roles and
scopes, 401/403), lists the configs through the request handler's
``on_list_task_push_notification_configs`` with the caller's ``ServerCallContext`` (so only
the owner's task answers; another owner's or an unknown one is A2A's ``TaskNotFoundError``:
HTTP 404 with the REST error body) and adds each config's status. Its errors, ours
included (a store outage, also of the status records: 503 with ``Retry-After``), are
answered as the A2A REST routes answer them (``streams/answers.py``)::

    {"taskId": "t-1", "configs": [{"id": "mine", "url": "https://hooks.example.com/a2a",
      "status": "failed", "statusReason": "HTTP 503 (after 4 attempts)"}]}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.types import ListTaskPushNotificationConfigsRequest
from a2a.utils.error_handlers import rest_error_handler
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apcore_a2a.classify import PUSH_STATUS_PATH
from apcore_a2a.push.status import ConfigStatusBook
from apcore_a2a.storage.outages import guarded

if TYPE_CHECKING:
    from a2a.server.request_handlers import RequestHandler
    from a2a.server.routes.common import ServerCallContextBuilder


def status_route(
    handler: RequestHandler,
    statuses: ConfigStatusBook,
    context_builder: ServerCallContextBuilder,
) -> Route:
    """The owner-scoped status route (see the module docstring)."""

    @rest_error_handler
    async def endpoint(request: Request) -> Response:
        task_id = str(request.path_params["task_id"])
        listed = await handler.on_list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id), context_builder.build(request)
        )
        states = await guarded(statuses.of(task_id, list(listed.configs))) if listed.configs else {}
        configs: list[dict[str, Any]] = []
        for config in listed.configs:
            config_id = config.id or task_id  # as the stores default it
            reason = states[config_id][1]
            status = "active" if reason is None else "failed"
            configs.append(
                {"id": config_id, "url": config.url, "status": status, "statusReason": reason}
            )
        document = {"taskId": task_id, "configs": configs}
        return JSONResponse(document, headers={"Cache-Control": "no-store"})

    return Route(PUSH_STATUS_PATH, endpoint, methods=["GET"], name="push_status")
