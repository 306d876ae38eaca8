"""Who is calling: the apcore ``Identity`` of a request, as the SDK and apcore see it.

Authentication (HTTP middleware or gRPC interceptor) stores the caller's apcore
``Identity`` in the ASGI scope under :data:`IDENTITY_SCOPE_KEY`; the call-context builders
turn it into an :class:`IdentityUser`, the SDK ``User`` that owns tasks and push configs;
the executor hands the same identity to apcore so ACL conditions apply.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from a2a.auth.user import User

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from apcore import Identity

__all__ = [
    "AUTH_ISSUER_ATTR",
    "AUTH_SCHEME_ATTR",
    "IDENTITY_SCOPE_KEY",
    "MAX_OWNER_CHARS",
    "IdentityUser",
    "identity_of",
    "owner_key",
]

#: ASGI scope key under which auth middleware leaves the caller's apcore ``Identity``.
IDENTITY_SCOPE_KEY = "apcore.identity"
#: Identity attribute naming how the caller authenticated (``"jwt"``, ``"apikey"``, ...).
AUTH_SCHEME_ATTR = "auth_scheme"
#: Identity attribute holding the token issuer (``iss``) for schemes that have one.
AUTH_ISSUER_ATTR = "auth_issuer"
#: The SDK's SQL stores keep the owner in a VARCHAR(255) column.
MAX_OWNER_CHARS = 255


def owner_key(identity: Identity) -> str:
    """The task owner of *identity*: the key the task and push-config stores scope by.

    An identity stamped with :data:`AUTH_SCHEME_ATTR` owns ``"<scheme>:<issuer tag>:<id>"``
    -- the issuer tag is the first 16 hex digits of the SHA-256 of :data:`AUTH_ISSUER_ATTR`
    (empty without an issuer) -- so equal ids from different authenticators (a JWT
    ``sub=alice``, an API key named ``alice``, two identity providers) never share tasks.
    Scheme and tag contain no ``:``, so the key splits back unambiguously. An identity
    without a scheme (a custom authenticator that sets none) owns its bare ``id``. A key
    longer than the stores' 255 characters becomes ``"sha256:<hex digest of the key>"``.

    Example::

        owner_key(Identity(id="alice", attrs={"auth_scheme": "apikey"}))   # "apikey::alice"
    """
    scheme = identity.attrs.get(AUTH_SCHEME_ATTR)
    if isinstance(scheme, str) and scheme:
        issuer = identity.attrs.get(AUTH_ISSUER_ATTR)
        tag = (
            hashlib.sha256(issuer.encode("utf-8")).hexdigest()[:16]
            if isinstance(issuer, str) and issuer
            else ""
        )
        owner = f"{scheme.replace(':', '_')}:{tag}:{identity.id}"
    else:
        owner = str(identity.id)
    if len(owner) > MAX_OWNER_CHARS:
        owner = "sha256:" + hashlib.sha256(owner.encode("utf-8")).hexdigest()
    return owner


class IdentityUser(User):
    """An authenticated SDK user backed by an apcore ``Identity``.

    ``user_name`` is :func:`owner_key` of the identity (how the caller authenticated plus
    the identity id), which is what the SDK stores use as the owner key; the apcore
    identity itself, with its plain ``id``, is what modules and the ACL see.
    """

    __slots__ = ("_owner", "identity")

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self._owner = owner_key(identity)

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._owner


def identity_of(context: ServerCallContext | None) -> Identity | None:
    """The apcore identity of a call, or ``None`` for anonymous callers."""
    if context is None:
        return None
    user = context.user
    return user.identity if isinstance(user, IdentityUser) else None
