"""Who is calling, and which modules they may call: skill ids are module ids, so "may this
caller see skill S" is asked of the apcore ACL without executing anything (preflight,
routing, per-caller cards). apcore's control modules (``system.control.*``) are for
callers with the :data:`OPERATOR_ROLE` only.

The caller travels where Starlette and a2a-sdk look for it: authentication leaves
``scope["user"]`` (:class:`Caller`, whose ``display_name`` is the task owner) and
``scope["auth"]`` (:class:`CallerCredentials`, the apcore ``Identity`` and its scopes), so
the SDK's own context builder makes the owner (``user.user_name``) and carries the
identity (``state["auth"]``); gRPC's builder makes a :class:`Caller` too.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from a2a.auth.user import UnauthenticatedUser, User
from apcore import Context
from apcore.builtin_steps import BuiltinACLCheck
from starlette.authentication import AuthCredentials, BaseUser

from apcore_a2a.adapters.skills import CONTROL_PREFIX
from apcore_a2a.edge.keys import MAX_KEY_CHARS, stored_key

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from apcore import ACL, Executor, Identity

#: Identity attribute naming how the caller authenticated (``"jwt"``, ``"apikey"``, ...).
AUTH_SCHEME_ATTR = "auth_scheme"
#: Identity attribute holding the token issuer (``iss``) for schemes that have one.
AUTH_ISSUER_ATTR = "auth_issuer"
#: The SDK's SQL stores keep the owner in a VARCHAR(255) column.
MAX_OWNER_CHARS = MAX_KEY_CHARS
#: Anonymous IPv6 callers are counted by network of this prefix length by default (the
#: ``ipv6_caller_prefix`` setting): a host is given a /64 at least (RFC 6177), so counting
#: its addresses apart gave it 2**64 quotas.
IPV6_CALLER_PREFIX = 64
#: The role of callers who operate the agent: ``/health`` details, apcore's control modules.
OPERATOR_ROLE = "operator"
#: Identity types apcore gives a meaning of its own (the ACL's ``@system`` caller and
#: ``identity_types: [system]`` match ``identity.type == "system"``): the host's own calls,
#: never a remote caller's, so no credential may name them (docs/auth.md, "Identity types").
RESERVED_IDENTITY_TYPES = frozenset({"system"})


def reserved_type(kind: object) -> bool:
    """Whether *kind* names a type apcore reserves (any case, any surrounding space)."""
    return isinstance(kind, str) and kind.strip().casefold() in RESERVED_IDENTITY_TYPES


def owner_key(identity: Identity) -> str:
    """The task owner of *identity*: the key the task and push-config stores scope by.

    ``"<scheme>:<issuer tag>:<id>"``, so equal ids from different authenticators never
    share tasks; the bare ``id`` without a scheme (``"id:<hex>"``, its SHA-256, when it is
    spelled as one of these forms or an anonymous one); ``"sha256:<hex>"`` of a key no
    store holds: longer than their 255 characters, or with a NUL or a lone surrogate (a
    token's ``sub`` can spell both), so such a caller is served like any other
    (docs/auth.md, "Task owners")::

        owner_key(Identity(id="alice", attrs={"auth_scheme": "apikey"}))   # "apikey::alice"
    """
    scheme = identity.attrs.get(AUTH_SCHEME_ATTR)
    if isinstance(scheme, str) and scheme:
        issuer = identity.attrs.get(AUTH_ISSUER_ATTR)
        has_issuer = isinstance(issuer, str) and issuer
        tag = hashlib.sha256(_utf8(issuer)).hexdigest()[:16] if has_issuer else ""
        # No ":" in scheme or tag, so the key splits back unambiguously.
        owner = f"{scheme.replace(':', '_')}:{tag}:{identity.id}"
    else:
        owner = str(identity.id)
        # An authenticator of yours that sets no scheme: an id that is empty (the SDK's
        # anonymous owner, and tasks older versions stored anonymously) or spelled as a
        # derived owner or quota key is not that owner, nor that key ("id:" is a form too).
        if not owner or (":" in owner and _DERIVED.match(owner)):
            return "id:" + hashlib.sha256(_utf8(owner)).hexdigest()
    return _bounded(owner)


#: The forms owners and quota keys are derived in, any case (a column may compare so).
_DERIVED = re.compile(r"(anonymous|ip|sha256|id):|[^:]*:([0-9a-f]{16})?:", re.IGNORECASE)


def _bounded(key: str) -> str:
    """*key* as every store holds it (:func:`~apcore_a2a.edge.keys.stored_key`)."""
    return stored_key(key, MAX_OWNER_CHARS)


def _utf8(text: str) -> bytes:
    # A token's JSON can spell a lone surrogate ("\ud800"), which strict UTF-8 refuses;
    # surrogatepass keeps the bytes distinct per string, so owners stay apart.
    return text.encode("utf-8", "surrogatepass")


def caller_key(
    identity: Identity | None, address: str | None, ipv6_prefix: int = IPV6_CALLER_PREFIX
) -> str:
    """The key quotas count by, on every binding: the task owner, or ``ip:<address>`` for
    anonymous callers (:func:`address_key`)."""
    return owner_key(identity) if identity is not None else address_key(address, ipv6_prefix)


def address_key(address: str | None, ipv6_prefix: int = IPV6_CALLER_PREFIX) -> str:
    """``ip:<address>`` of an anonymous caller; an IPv6 address counts as its network of
    *ipv6_prefix* bits (``ip:2001:db8::/64``), an IPv4-mapped one as the IPv4 address;
    anything else that is not an IP address, as given::

        address_key("2001:db8::7")        # "ip:2001:db8::/64"
        address_key("::ffff:192.0.2.7")   # "ip:192.0.2.7"
    """
    if not address:
        return "ip:unknown"
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:  # what a trusted proxy forwarded, whatever it was sent
        return _bounded(f"ip:{address}")
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"ip:{ip.ipv4_mapped}"
        if ip.is_loopback:  # ::1 alone, not the addresses of ::/64
            return f"ip:{ip}"
        return f"ip:{ipaddress.IPv6Network((ip, ipv6_prefix), strict=False)}"
    return f"ip:{ip}"


class Caller(BaseUser, User):
    """An authenticated caller: Starlette's ``scope["user"]`` and, over gRPC, the SDK's
    ``ServerCallContext.user``. The stores scope by its owner (:func:`owner_key`, which
    ``display_name`` and ``user_name`` give); modules and the ACL see the apcore identity."""

    def __init__(self, identity: Identity) -> None:
        self.apcore_identity = identity
        self.owner = owner_key(identity)

    @property
    def identity(self) -> Identity:
        """The apcore identity (Starlette's ``BaseUser.identity`` is a string id)."""
        return self.apcore_identity

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        """The task owner: what a2a-sdk's ``StarletteUser.user_name`` reads."""
        return self.owner

    @property
    def user_name(self) -> str:
        """The task owner, as the SDK's stores read it."""
        return self.owner


class AnonymousCaller(UnauthenticatedUser):
    """A caller without credentials of an agent that authenticates the others: the owner of
    its tasks and push configs is its address key (``anonymous:ip:203.0.113.7``, IPv6 by
    network, as :func:`address_key` makes it), so anonymous callers at other addresses never
    see them (docs/auth.md, "Task owners")."""

    def __init__(self, key: str) -> None:
        self.owner = _bounded(f"anonymous:{key}")

    @property
    def user_name(self) -> str:
        """The task owner, as the SDK's stores read it."""
        return self.owner


class CallerCredentials(AuthCredentials):
    """``scope["auth"]`` of an authenticated caller: its scopes, and the identity (the SDK's
    builder hands it on as ``ServerCallContext.state["auth"]``)."""

    def __init__(self, identity: Identity, scopes: Iterable[str] = ()) -> None:
        super().__init__(list(scopes))
        self.identity = identity


def caller_identity(scope: Mapping[str, Any]) -> Identity | None:
    """The identity authentication left in an ASGI *scope*, ``None`` for anonymous."""
    user = scope.get("user")
    return user.identity if isinstance(user, Caller) else None


def identity_of(context: ServerCallContext | None) -> Identity | None:
    """The apcore identity of a call, or ``None`` for anonymous callers."""
    if context is None:
        return None
    user = context.user
    if isinstance(user, Caller):
        return user.identity
    auth = context.state.get("auth")
    return auth.identity if isinstance(auth, CallerCredentials) else None


#: per strategy, the steps last seen and, per gate class asked about, those of that class
_GATES: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], dict[type, list[Any]]]] = (
    weakref.WeakKeyDictionary()
)


def _gate_steps(strategy: Any, gate: type) -> list[Any]:
    """The steps of *strategy* that are *gate* steps, in order; found again once its steps
    change (each call asks twice: an ``isinstance`` of an ABC per step is a Python call)."""
    steps = tuple(getattr(strategy, "steps", ()))
    try:
        seen = _GATES.get(strategy)
    except TypeError:  # not weakly referable: looked at each time
        return [step for step in steps if isinstance(step, gate)]
    if seen is None or seen[0] != steps:
        seen = _GATES[strategy] = (steps, {})
    found = seen[1].get(gate)
    if found is None:
        found = seen[1][gate] = [step for step in steps if isinstance(step, gate)]
    return found


def gate_holding(executor: Any, gate: type, provider: str) -> Any:
    """What the first built-in *gate* step of *executor*'s strategy that has one holds as
    *provider* (the ACL gate's ``acl``, the approval gate's ``handler``), if any."""
    for step in _gate_steps(getattr(executor, "current_strategy", None), gate):
        if (found := getattr(step, provider)) is not None:
            return found
    return None


def is_operator(identity: Identity | None) -> bool:
    """Whether *identity* (``None`` = anonymous) has the :data:`OPERATOR_ROLE`."""
    return identity is not None and OPERATOR_ROLE in identity.roles


def sight(
    executor: Executor, identity: Identity | None, published: Collection[str]
) -> Callable[[str], bool] | None:
    """Which modules *identity* may see: ``None`` for an operator (every one); else those
    *published* as skills that it may call."""
    if is_operator(identity):
        return None
    return lambda m: m in published and denial(executor, identity, m) is None


def _operates(identity: Identity | None, module_id: str) -> bool:
    """Whether *identity* may see *module_id* by the operator rule (control modules)."""
    return not module_id.startswith(CONTROL_PREFIX) or is_operator(identity)


def denial(executor: Executor, identity: Identity | None, module_id: str) -> str | None:
    """Why *identity* (``None`` = anonymous) may not call *module_id*, or ``None``."""
    if not _operates(identity, module_id):
        return f"a control module needs the {OPERATOR_ROLE!r} role"
    acl: ACL | None = gate_holding(executor, BuiltinACLCheck, "acl")
    if acl is None:
        return None
    return _why(acl.check_access(None, module_id, Context.create(identity=identity)))


async def run_denial(
    executor: Executor, module_id: str, context_of: Callable[[], Context]
) -> str | None:
    """Why apcore's ACL gate will refuse the call of *module_id* in the context *context_of*
    makes (a run's own apcore context: its identity and ``a2a.*`` data; made only when
    there is an ACL), asked as the gate asks (async conditions included), or ``None``."""
    acl: ACL | None = gate_holding(executor, BuiltinACLCheck, "acl")
    if acl is None:
        return None
    context = context_of()
    if hasattr(acl, "async_check_access"):  # as the gate: async first, then sync
        return _why(await acl.async_check_access(context.caller_id, module_id, context))
    return _why(acl.check_access(context.caller_id, module_id, context))


def _why(decision: Any) -> str | None:
    """Why an ACL *decision* refuses, or ``None`` when it allows."""
    return None if decision.access == "allow" else str(decision.reason or "denied")


def visible_modules(
    executor: Executor, identity: Identity | None, module_ids: Iterable[str]
) -> set[str]:
    """The modules *identity* (``None`` = anonymous) may call (:func:`denial` has none)."""
    return {m for m in module_ids if denial(executor, identity, m) is None}


async def visible_modules_async(
    executor: Executor, identity: Identity | None, module_ids: Iterable[str]
) -> set[str]:
    """Like :func:`visible_modules`, also evaluating async ACL conditions."""
    acl: ACL | None = gate_holding(executor, BuiltinACLCheck, "acl")
    context = Context.create(identity=identity)
    return {
        m
        for m in module_ids
        if _operates(identity, m)
        and (acl is None or (await acl.async_check_access(None, m, context)).access == "allow")
    }
