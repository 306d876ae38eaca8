"""The SDK ``ServerCallContext`` of an HTTP request, carrying the caller's identity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder

from apcore_a2a.execution.identity import IDENTITY_SCOPE_KEY, IdentityUser
from apcore_a2a.server.guards import caller_of
from apcore_a2a.server.resume import (
    LAST_EVENT_ID_STATE_KEY,
    SSE_IDS_SCOPE_KEY,
    SSE_IDS_STATE_KEY,
    last_event_id_of,
)
from apcore_a2a.server.task_quota import CALLER_STATE_KEY

if TYPE_CHECKING:
    from starlette.requests import Request


class ApCoreCallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK default builder (keeps ``state['headers']``) plus the apcore identity
    and the caller key quotas count by."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[CALLER_STATE_KEY] = caller_of(request.scope)
        ids = request.scope.get(SSE_IDS_SCOPE_KEY)
        if ids is not None:
            context.state[SSE_IDS_STATE_KEY] = ids
            context.state[LAST_EVENT_ID_STATE_KEY] = last_event_id_of(request.scope)
        return context

    def build_user(self, request: Request) -> User:
        identity: Any = request.scope.get(IDENTITY_SCOPE_KEY)
        if identity is not None:
            return IdentityUser(identity)
        return UnauthenticatedUser()
