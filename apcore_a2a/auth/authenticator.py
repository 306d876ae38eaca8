"""The :class:`Authenticator` protocol and combinators shared by every credential type."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from apcore import Identity

from apcore_a2a.execution.identity import AUTH_ISSUER_ATTR, AUTH_SCHEME_ATTR

if TYPE_CHECKING:
    from a2a.types import SecurityScheme

__all__ = [
    "AnyAuthenticator",
    "Authenticator",
    "InvalidCredentials",
    "header_value",
    "identity_from_metadata",
    "stamp_identity",
]


class InvalidCredentials(Exception):
    """Credentials were presented but rejected; the message is a short reason for the log
    and never contains the credential."""


@runtime_checkable
class Authenticator(Protocol):
    """Turns request headers into an apcore ``Identity``.

    ``authenticate`` answers an identity (valid credentials), ``None`` (no credentials it
    understands) or raises :class:`InvalidCredentials`. ``None`` is what lets
    ``require_auth=False`` admit anonymous callers while a bad token is still refused
    instead of silently downgraded to anonymous.

    Example::

        class StaticToken:
            async def authenticate(self, headers):
                if headers.get("authorization") == "Bearer s3cret":
                    return Identity(id="ops")
                return None

            def security_schemes(self):
                return {"bearer": SecurityScheme(http_auth_security_scheme=...)}
    """

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        """Return the caller's identity, ``None`` without credentials, or raise
        :class:`InvalidCredentials`."""
        ...

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """The A2A security schemes (name -> scheme) this authenticator accepts."""
        ...


class AnyAuthenticator:
    """Accepts a caller that any of several authenticators accepts (e.g. JWT *or* API key).

    Authenticators are tried in order; the first identity wins. If none succeeds and at
    least one rejected presented credentials, the request is rejected.
    """

    def __init__(self, authenticators: Iterable[Authenticator]) -> None:
        self.authenticators: tuple[Authenticator, ...] = tuple(authenticators)
        if not self.authenticators:
            raise ValueError("AnyAuthenticator needs at least one authenticator")

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        rejection: InvalidCredentials | None = None
        for authenticator in self.authenticators:
            try:
                identity = await authenticator.authenticate(headers)
            except InvalidCredentials as exc:
                rejection = rejection or exc
                continue
            if identity is not None:
                return identity
        if rejection is not None:
            raise rejection
        return None

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """The union of every member's schemes."""
        schemes: dict[str, SecurityScheme] = {}
        for authenticator in self.authenticators:
            schemes.update(authenticator.security_schemes())
        return schemes

    async def aclose(self) -> None:
        """Close every member that has an ``aclose()`` (e.g. a JWKS fetch in flight)."""
        for authenticator in self.authenticators:
            close = getattr(authenticator, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()


def stamp_identity(identity: Identity, scheme: str, issuer: str | None = None) -> Identity:
    """A copy of *identity* with ``attrs`` recording how the caller authenticated
    (``auth_scheme``, and ``auth_issuer`` when there is one).

    The task owner is derived from them, so callers of two authenticators never share
    tasks even when their ids are equal. Values already in ``attrs`` under those names are
    replaced: only the authenticator may say this.
    """
    attrs = {k: v for k, v in identity.attrs.items() if k != AUTH_ISSUER_ATTR}
    attrs[AUTH_SCHEME_ATTR] = scheme
    if issuer:
        attrs[AUTH_ISSUER_ATTR] = issuer
    return Identity(id=identity.id, type=identity.type, roles=identity.roles, attrs=attrs)


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup that works on plain dicts as well as Starlette headers."""
    wanted = name.lower()
    value = headers.get(wanted)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == wanted), None)
    return value


async def identity_from_metadata(
    authenticator: Authenticator,
    metadata: Iterable[tuple[str, str | bytes]] | None,
) -> Identity | None:
    """Authenticate a gRPC call from its invocation metadata (``authorization`` etc.),
    with the answers of :meth:`Authenticator.authenticate`; binary entries are ignored."""
    headers: dict[str, str] = {}
    for key, value in metadata or ():
        if not (isinstance(value, bytes) or key.endswith("-bin")):
            headers.setdefault(key.lower(), value)
    return await authenticator.authenticate(headers)
