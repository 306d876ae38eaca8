"""The :class:`Authenticator` protocol, its combinators, the static API-key authenticator,
and the :class:`Gate`: who may use the agent at all, the decision the HTTP middleware and
the gRPC interceptor share (each renders the refusal its own way; per-skill rules stay with
apcore's ACL)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import logging
import marshal
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import Any, Protocol, runtime_checkable

from a2a.types import APIKeySecurityScheme, SecurityScheme
from apcore import Identity

from apcore_a2a.adapters.errors import one_line
from apcore_a2a.errors import PermissionDeniedError, UnauthenticatedError
from apcore_a2a.execution.identity import AUTH_ISSUER_ATTR, AUTH_SCHEME_ATTR, reserved_type

logger = logging.getLogger("apcore_a2a.auth")

_MIN_KEY_CHARS = 16
#: Identity type given to keys configured with a bare identity id.
API_KEY_IDENTITY_TYPE = "service"
#: ``auth_scheme`` of API-key identities (their tasks are owned by ``apikey::<id>``).
API_KEY_SCHEME = "apikey"
#: ``Identity.attrs`` key of the OAuth scopes a token granted (set by the JWT authenticator).
SCOPES_ATTR = "scopes"


class InvalidCredentials(Exception):
    """Credentials were presented but rejected; the message is a short reason for the log
    and never contains the credential."""


@runtime_checkable
class Authenticator(Protocol):
    """Turns request headers into an apcore ``Identity`` (an example is in docs/auth.md,
    "Writing your own authenticator").

    ``authenticate`` answers an identity (valid credentials), ``None`` (no credentials it
    understands) or raises :class:`InvalidCredentials`. ``None`` is what lets
    ``require_auth=False`` admit anonymous callers while a bad token is still refused
    instead of silently downgraded to anonymous.
    """

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        """The caller's identity, ``None`` without credentials, or :class:`InvalidCredentials`."""
        ...

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """The A2A security schemes (name -> scheme) this authenticator accepts."""
        ...


class AnyAuthenticator:
    """Accepts a caller that any of several authenticators accepts (e.g. JWT *or* API key),
    tried in order; when none does and one rejected presented credentials, so is the call."""

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
        return {k: v for a in self.authenticators for k, v in a.security_schemes().items()}

    async def aclose(self) -> None:
        """Close every member that has an ``aclose()`` (e.g. a JWKS fetch in flight)."""
        for authenticator in self.authenticators:
            close = getattr(authenticator, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()


def stamp_identity(identity: Identity, scheme: str, issuer: str | None = None) -> Identity:
    """A copy of *identity* whose ``attrs`` record how the caller authenticated
    (``auth_scheme``, and ``auth_issuer`` when there is one), replacing any values there:
    the task owner is derived from them, so only the authenticator may say this."""
    attrs = {k: v for k, v in identity.attrs.items() if k != AUTH_ISSUER_ATTR}
    attrs[AUTH_SCHEME_ATTR] = scheme
    if issuer:
        attrs[AUTH_ISSUER_ATTR] = issuer
    return dataclasses.replace(identity, attrs=attrs)


#: The types marshal writes back as they were: it writes any other buffer (a bytes
#: subclass, a bytearray) back as bytes, and refuses the rest.
_MARSHALLED = frozenset({dict, list, tuple, set, frozenset, str, bytes, int, float, bool})
_MARSHALLED |= {complex, type(None)}


def remembered(identity: Identity) -> Callable[[], Identity]:
    """Copies of a remembered *identity*, one per request: the dicts, lists and sets in
    its ``attrs`` (a claim's JSON) copied too, so a module changing them changes nothing
    for the next request. Copied by ``marshal`` (C, no recursion: a claim nested hundreds
    deep, which PyJWT parses, is copied too; about 1 µs, 5 times faster than Python for a
    wide claim) when it writes every value back as it was (known once, here); else in
    Python, the other objects (an application's) shared."""
    copy = _marshalled if _marshals(identity.attrs) else _copied
    kept = dataclasses.replace(identity, attrs=copy(identity.attrs))  # *identity* is served
    return lambda: dataclasses.replace(kept, attrs=copy(kept.attrs))


def _marshals(value: Any) -> bool:
    """Whether *value* holds only types marshal writes back as they were, all the way in."""
    stack, seen = [value], set()
    while stack:
        item = stack.pop()
        if type(item) not in _MARSHALLED:
            return False
        if isinstance(item, dict | list | tuple | set | frozenset) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(chain.from_iterable(item.items()) if isinstance(item, dict) else item)
    return True


def _marshalled(attrs: dict[str, Any]) -> Any:
    # bytes this line wrote, read back at once: nothing from outside is unmarshalled
    return marshal.loads(marshal.dumps(attrs))  # noqa: S302


def _copied(value: Any) -> Any:
    kind = type(value)  # a subclass is the application's: shared, not made another type
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    # A tuple too: it may hold a list (a frozenset holds only hashable items).
    return kind(map(_copied, value)) if kind in (list, set, tuple) else value


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """The credential header *name* (any case) of a plain dict, Starlette headers or
    :func:`metadata_headers`; :class:`InvalidCredentials` when it was given more than once:
    which copy counts would be a guess, and a proxy in front may have guessed the other."""
    wanted = name.lower()
    found = [v for k, v in headers.items() if k.lower() == wanted]  # Starlette: every copy
    if len(found) > 1 or wanted in getattr(headers, "repeated", ()):
        raise InvalidCredentials(f"the {name} header was given more than once")
    return found[0] if found else None


async def identity_from_metadata(
    authenticator: Authenticator,
    metadata: Iterable[tuple[str, str | bytes]] | None,
) -> Identity | None:
    """Authenticate a gRPC call from its invocation metadata (``authorization`` etc.),
    with the answers of :meth:`Authenticator.authenticate`; binary entries are ignored."""
    return await authenticator.authenticate(metadata_headers(metadata))


class MetadataHeaders(dict[str, str]):
    """gRPC metadata as headers: the first value of each name, as Starlette's ``get`` has
    it, and the names given more than once (:func:`header_value` refuses those)."""

    repeated: frozenset[str] = frozenset()


def metadata_headers(metadata: Iterable[tuple[str, str | bytes]] | None) -> MetadataHeaders:
    """The text entries of gRPC *metadata* as headers (lower-cased; the first of a name wins)."""
    headers = MetadataHeaders()
    repeated: set[str] = set()
    for key, value in metadata or ():
        if isinstance(value, str) and not key.endswith("-bin"):
            name = key.lower()
            if name in headers:
                repeated.add(name)
            headers.setdefault(name, value)
    headers.repeated = frozenset(repeated)
    return headers


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def parse_api_key_entries(entries: Iterable[str]) -> dict[str, Identity]:
    """Parse settings entries ``"key"``, ``"key=identity_id"`` or
    ``"key=identity_id:role+role"`` into ``{key: Identity}``; a key without an id gets a
    stable one derived from its hash, never the key itself."""
    keys: dict[str, Identity] = {}
    for raw in entries:
        key, sep, rest = raw.strip().partition("=")
        if "," in raw or any(c.isspace() for c in key):
            # two keys given as one ("k1,k2", "k1 k2"), served as one key no caller holds
            raise ValueError(
                "an API key entry must not hold a comma, nor its key whitespace (one key per entry)"
            )
        ident, colon, named = rest.partition(":")
        key, ident = key.strip(), ident.strip()
        roles = tuple(role.strip() for role in named.split("+") if role.strip())
        if not key or (sep and not ident) or (colon and not roles):
            raise ValueError(
                "API key entries must look like 'KEY', 'KEY=IDENTITY_ID' or "
                "'KEY=IDENTITY_ID:ROLE+ROLE'"
            )
        if key in keys:  # which identity it stands for would be the later entry's
            raise ValueError("an API key is given twice (one entry per key)")
        ident = ident or "apikey-" + _digest(key).hex()[:12]
        keys[key] = Identity(id=ident, type=API_KEY_IDENTITY_TYPE, roles=roles)
    return keys


class APIKeyAuthenticator:
    """Accept requests whose *header* carries one of *keys*, each mapped to an ``Identity``
    or a bare id (an identity of type ``"service"``). Keys are held only as SHA-256 digests
    and compared in constant time; identities are stamped ``auth_scheme="apikey"``.

    Example::

        APIKeyAuthenticator(keys={"k-7f1c...": Identity(id="billing", roles=("admin",))})
    """

    def __init__(self, keys: Mapping[str, Identity | str], *, header: str = "X-API-Key") -> None:
        if not keys:
            raise ValueError("APIKeyAuthenticator needs at least one key")
        self.header = header
        self._keys: list[tuple[bytes, Callable[[], Identity]]] = []
        for key, who in keys.items():
            if not key:
                raise ValueError("API keys must not be empty")
            if len(key) < _MIN_KEY_CHARS:
                logger.warning(
                    "an API key is %d characters long; %d or more are recommended",
                    len(key),
                    _MIN_KEY_CHARS,
                )
            identity = (
                who if isinstance(who, Identity) else Identity(id=who, type=API_KEY_IDENTITY_TYPE)
            )
            if reserved_type(identity.type):
                raise ValueError(f"an API key's identity may not be of type {identity.type!r}")
            self._keys.append((_digest(key), remembered(stamp_identity(identity, API_KEY_SCHEME))))

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """``{"apiKey": API key in the configured header}``."""
        return {
            "apiKey": SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header", name=self.header, description="Static API key"
                )
            )
        }

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        """The identity bound to the presented key; see :class:`~apcore_a2a.auth.Authenticator`."""
        presented = header_value(headers, self.header)
        if presented is None:
            return None
        digest = _digest(presented.strip())
        # Compare against every key so the time taken does not depend on which one matched.
        found = [who for candidate, who in self._keys if hmac.compare_digest(candidate, digest)]
        if not found:
            raise InvalidCredentials("unknown API key")
        return found[0]()


def words(value: Any) -> tuple[str, ...]:
    """A list of strings, or a space-separated string (OAuth ``scope``), as a tuple."""
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list | tuple):
        return tuple(v for v in value if isinstance(v, str) and v)
    return ()


class Gate:
    """Authenticate a caller (:meth:`identify`) and decide whether it may use the agent
    (:meth:`admit`): *one* of *roles* and *all* of *scopes* (RFC 6749 §3.3), when given;
    without *require_auth*, anonymous callers may call every A2A method but the extended
    card (:meth:`anonymous_ok`). Refusals never say why a credential failed (the INFO log
    does, without the credential); a permission refusal names what the agent requires,
    never what the caller holds (spec §3.3.2)."""

    def __init__(
        self,
        authenticator: Authenticator,
        *,
        roles: Iterable[str] = (),
        scopes: Iterable[str] = (),
        require_auth: bool = True,
    ) -> None:
        self.authenticator = authenticator
        self.roles, self.scopes = tuple(roles), tuple(scopes)
        self.require_auth = require_auth
        # One challenge per scheme on the card (RFC 9110 §11.6.1), so a client can tell
        # what to send without the card.
        found: list[str] = []
        for scheme in authenticator.security_schemes().values():
            if scheme.HasField("api_key_security_scheme"):
                found.append(f'ApiKey header="{scheme.api_key_security_scheme.name}"')
            elif scheme.HasField("http_auth_security_scheme"):
                found.append(scheme.http_auth_security_scheme.scheme.capitalize() or "Bearer")
        #: ``WWW-Authenticate`` values for a 401 (gRPC: trailers)
        self.challenges = list(dict.fromkeys(found)) or ["Bearer"]
        self._message = UnauthenticatedError.message
        if self.challenges == ["Bearer"]:
            self._message = "Missing or invalid Bearer token"
        elif len(self.challenges) == 1 and self.challenges[0].startswith("ApiKey"):
            self._message = "Missing or invalid API key"

    def unauthenticated(self) -> UnauthenticatedError:
        return UnauthenticatedError(self._message)

    async def identify(self, headers: Mapping[str, str]) -> Identity | None:
        """The caller's identity, ``None`` without credentials; bad ones, and an identity of
        a type apcore reserves (:func:`~apcore_a2a.execution.identity.reserved_type`, from
        whichever authenticator), raise :class:`~apcore_a2a.errors.UnauthenticatedError`."""
        try:
            identity = await self.authenticator.authenticate(headers)
            if identity is not None and reserved_type(identity.type):
                # Here, not in each authenticator: yours are held to it too.
                raise InvalidCredentials(f"identity type {identity.type[:20]!r} is apcore's own")
        except InvalidCredentials as exc:
            # The reason, never the credential: these exceptions name what failed.
            logger.info("refused credentials: %s", one_line(exc, 300))
            raise self.unauthenticated() from None
        return identity

    def anonymous_ok(self, method: str | None) -> bool:
        """Whether an anonymous caller may call *method* (its A2A 1.0 name, on every
        binding): the extended card always needs credentials, as its HTTP route does."""
        return not self.require_auth and method != "GetExtendedAgentCard"

    def admit(self, identity: Identity | None, *, anonymous_ok: bool) -> None:
        """Raise unless *identity* may use the agent. Anonymous callers pass only when
        *anonymous_ok* and no role or scope is required."""
        if identity is None:
            if anonymous_ok and not (self.roles or self.scopes):
                return
            raise self.unauthenticated()
        granted = words(identity.attrs.get(SCOPES_ATTR))
        missing = " ".join(s for s in self.scopes if s not in granted)
        wanted = f"scope {missing!r}" if missing else ""
        if self.roles and not set(self.roles) & set(identity.roles):
            wanted = "role " + " or ".join(repr(r) for r in self.roles)
        if wanted:
            raise PermissionDeniedError(f"Permission denied: this agent requires the {wanted}")
