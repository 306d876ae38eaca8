"""REST 0.3 push configs as the 0.3 ``google.api.http`` mapping has them.

``POST`` takes the spec's config form and the RPC request form the Python clients send
(told apart by their keys; a body naming another task than the path is refused) and answers
the 0.3 ``TaskPushNotificationConfig`` JSON; ``DELETE .../{push_id}`` answers ``{}``.
"""

from __future__ import annotations

import apcore_a2a.upstream.client_first  # noqa: F401  (before the SDK server: see it)

# isort: split
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import proto_utils
from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
from a2a.compat.v0_3.conversions import (
    to_compat_task_push_notification_config,
    to_core_push_notification_config,
)
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.routes.common import DefaultServerCallContextBuilder, ServerCallContextBuilder
from a2a.types import DeleteTaskPushNotificationConfigRequest, TaskPushNotificationConfig
from a2a.utils import constants
from a2a.utils.error_handlers import rest_error_handler
from a2a.utils.errors import InvalidParamsError, InvalidRequestError
from a2a.utils.version_validator import validate_version
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from apcore_a2a._json import load_json, parse_refusal
from apcore_a2a._text import echoed

_CONFIGS = "/v1/tasks/{id}/pushNotificationConfigs"
# Keys of the RPC request form; the spec's config form has "name"/"pushNotificationConfig".
_REQUEST_KEYS = frozenset({"parent", "config", "configId", "config_id"})


def _parse_config(raw: bytes, task_id: str) -> TaskPushNotificationConfig:
    """The 1.0 config for a 0.3 REST create body of either form."""
    try:
        doc = load_json(raw)
    except (ValueError, RecursionError) as exc:
        # As the SDK refuses a REST 1.0 body that protobuf cannot parse: 400.
        raise InvalidRequestError(message=parse_refusal(exc).message) from None
    if not isinstance(doc, dict):
        raise InvalidParamsError(message="The request body must be a JSON object")
    config_id = ""
    named: list[str] = []
    if _REQUEST_KEYS & doc.keys():
        request = pb2_v03.CreateTaskPushNotificationConfigRequest()
        ParseDict(doc, request, ignore_unknown_fields=True)
        config, config_id, named = request.config, request.config_id, [request.parent]
    else:
        config = pb2_v03.TaskPushNotificationConfig()
        ParseDict(doc, config, ignore_unknown_fields=True)
    named.append(config.name)
    for name in named:  # tasks/{id} or tasks/{id}/pushNotificationConfigs/...
        parts = name.split("/")
        if len(parts) >= 2 and parts[0] == "tasks" and parts[1] not in ("", task_id):
            raise InvalidParamsError(
                message=f"The body names task {echoed(parts[1], quote=True)} but the path "
                f"names task {echoed(task_id, quote=True)}"
            )
    inner = proto_utils.FromProto.push_notification_config(config.push_notification_config)
    core = to_core_push_notification_config(inner)
    core.task_id = task_id
    if not core.id:
        name_parts = config.name.split("/")
        core.id = config_id or (name_parts[3] if len(name_parts) == 4 else "")
    return core


def rest03_push_routes(
    handler: RequestHandler, context_builder: ServerCallContextBuilder | None = None
) -> list[BaseRoute]:
    """The 0.3 REST create and delete routes; mount them before the SDK's REST routes."""
    builder = V03ServerCallContextBuilder(context_builder or DefaultServerCallContextBuilder())

    async def create(request: Request, context: ServerCallContext) -> Any:
        config = _parse_config(await request.body(), request.path_params["id"])
        stored = await handler.on_create_task_push_notification_config(config, context)
        compat = to_compat_task_push_notification_config(stored)
        return MessageToDict(proto_utils.ToProto.task_push_notification_config(compat))

    async def delete(request: Request, context: ServerCallContext) -> dict[str, Any]:
        params = DeleteTaskPushNotificationConfigRequest(
            task_id=request.path_params["id"], id=request.path_params["push_id"]
        )
        await handler.on_delete_task_push_notification_config(params, context)
        return {}

    def endpoint(call: Callable[[Request, ServerCallContext], Awaitable[Any]]) -> Any:
        checked = validate_version(constants.PROTOCOL_VERSION_0_3)(call)

        @rest_error_handler
        async def answer(request: Request) -> Response:
            return JSONResponse(await checked(request, builder.build(request)))

        return answer

    return [
        Route(_CONFIGS, endpoint(create), methods=["POST"]),
        Route(_CONFIGS + "/{push_id}", endpoint(delete), methods=["DELETE"]),
    ]
