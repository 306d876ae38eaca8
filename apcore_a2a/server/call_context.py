"""Bridge between the HTTP request and the SDK's ``ServerCallContext``.

Authentication middleware stores the caller's apcore ``Identity`` in the ASGI scope under
:data:`IDENTITY_SCOPE_KEY`; :class:`ApCoreCallContextBuilder` turns it into the SDK ``User``
that scopes tasks and push configs to their owner, and the executor hands the same identity
to apcore so ACL conditions apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder

if TYPE_CHECKING:
    from apcore import Identity
    from starlette.requests import Request

__all__ = ["IDENTITY_SCOPE_KEY", "ApCoreCallContextBuilder", "IdentityUser", "identity_of"]

#: ASGI scope key under which auth middleware leaves the caller's apcore ``Identity``.
IDENTITY_SCOPE_KEY = "apcore.identity"


class IdentityUser(User):
    """An authenticated SDK user backed by an apcore ``Identity``.

    ``user_name`` is the identity id, which is what the SDK stores use as the owner key.
    """

    __slots__ = ("identity",)

    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return str(self.identity.id)


def identity_of(context: ServerCallContext | None) -> Identity | None:
    """The apcore identity of a call, or ``None`` for anonymous callers."""
    if context is None:
        return None
    user = context.user
    return user.identity if isinstance(user, IdentityUser) else None


class ApCoreCallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK default builder (keeps ``state['headers']``) plus the apcore identity."""

    def build_user(self, request: Request) -> User:
        identity: Any = request.scope.get(IDENTITY_SCOPE_KEY)
        if identity is not None:
            return IdentityUser(identity)
        return UnauthenticatedUser()
