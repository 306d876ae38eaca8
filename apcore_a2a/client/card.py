"""The agent card as the client reads it: fetched and cached, verified, and which of its
interfaces a call goes to.

Signatures are checked with the caller's keys or the agent's own ``/.well-known/jwks.json``,
never the ``jku`` a card names: a card cannot choose who vouches for it. A served card may
carry a field twice (1.0 and a 0.3 copy), so it must verify both as the SDK client reads it
and as a strict 1.0 reader does; the client acts on the signed view. A card is data from the
network: an interface URL is followed only on the agent URL's origin unless
``allow_other_origins=True``, and even then gets none of the caller's credentials.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple
from urllib.parse import unquote, urljoin, urlsplit

import httpx
import jwt
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard
from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
from google.protobuf.json_format import MessageToDict, ParseDict

from apcore_a2a._addresses import host_class
from apcore_a2a._egress import agents_class, inward
from apcore_a2a._text import echoed
from apcore_a2a.client._bounded import get_at_most, parse_json
from apcore_a2a.client._translated import leaves_alone
from apcore_a2a.client.errors import (
    A2ADiscoveryError,
    CardVerificationError,
    CrossOriginEndpointError,
)

#: Well-known card locations, tried in order: A2A 1.0 / 0.3, then the pre-0.3 name.
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
#: The largest card read (decoded; a compressed card counts inflated).
MAX_CARD_BYTES = 4 * 1024 * 1024


class AgentCardFetcher:
    """Fetches an agent's card and keeps it for ``ttl`` seconds (monotonic clock).

    A stale card with an ``ETag`` is refetched conditionally (``304`` keeps it). With
    *verify*, every card fetched is replaced by what ``verify(card)`` returns before caching.

    Example::

        async with httpx.AsyncClient() as http:
            fetcher = AgentCardFetcher(http, "https://agent.example.com", ttl=60)
            card = await fetcher.fetch()       # HTTP request
            card = await fetcher.fetch()       # served from the cache
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        *,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        verify: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        if ttl < 0:
            raise ValueError("ttl must be >= 0")
        self._http = http
        self._base = base_url.rstrip("/")
        self._ttl = ttl
        self._clock = clock
        self._verify = verify
        self._card: dict[str, Any] | None = None
        self._fetched_at = 0.0
        self._etag: str | None = None
        self._path: str | None = None

    @property
    def cached(self) -> dict[str, Any] | None:
        """The last fetched card (possibly stale), or ``None`` before the first fetch."""
        return self._card

    @property
    def card_url(self) -> str | None:
        """The URL the card was last fetched from."""
        return self._base + self._path if self._path else None

    def invalidate(self) -> None:
        """Forget the cached card; the next :meth:`fetch` goes to the network."""
        self._card, self._etag, self._path = None, None, None

    @leaves_alone  # a public class: its errors keep no card (up to 4 MiB) either
    async def fetch(self, *, refresh: bool = False) -> dict[str, Any]:
        """Return the agent card, from the cache while it is younger than ``ttl``.

        Raises :class:`A2ADiscoveryError` (no card at any well-known path, or not a JSON
        card) or :class:`A2AConnectionError` (the agent cannot be reached).
        """
        if self._card is not None and not refresh and self._clock() - self._fetched_at < self._ttl:
            return self._card
        paths = [self._path] if self._path else list(CARD_PATHS)
        failures: list[str] = []
        for path in paths:
            # An ETag is kept with the card and path it came from (one path to try then).
            etag = {"If-None-Match": self._etag} if self._etag else {}
            url = self._base + path
            try:
                response, content, whole = await get_at_most(
                    self._http, url, MAX_CARD_BYTES, {"Accept": "application/json"} | etag
                )
            except httpx.DecodingError as exc:
                raise A2ADiscoveryError(f"agent card at {url} cannot be decoded: {exc}") from None
            if response.status_code == 304 and self._card is not None:
                card = self._card
            elif response.is_success:
                if not whole:
                    raise A2ADiscoveryError(
                        f"agent card at {url} is larger than {MAX_CARD_BYTES} bytes"
                    )
                card, problem = parse_json(content)
                if problem is not None:
                    raise A2ADiscoveryError(f"agent card at {url} is not valid JSON ({problem})")
                if not isinstance(card, dict) or not isinstance(card.get("name"), str):
                    raise A2ADiscoveryError(f"{url} did not return an agent card object")
                if self._verify is not None:
                    card = await self._verify(card)
                # An ETag that cannot be sent back as a header is not kept.
                etag = response.headers.get("etag")
                self._path, self._etag = path, etag if etag and etag.isascii() else None
            else:
                failures.append(f"{path} → HTTP {response.status_code}")
                continue
            self._card, self._fetched_at = card, self._clock()
            return card
        raise A2ADiscoveryError(f"no agent card at {self._base}: " + "; ".join(failures))


#: Where an apcore-a2a agent (and many others) publishes its public keys.
JWKS_PATH = "/.well-known/jwks.json"
#: A key set is a few kB; refuse to read much more.
_MAX_JWKS_BYTES = 512 * 1024
#: Asymmetric algorithms only: a card signed with a shared secret proves nothing.
ALGORITHMS = [f"{family}{bits}" for family in ("ES", "RS", "PS") for bits in (256, 384, 512)]
ALGORITHMS.append("EdDSA")

#: A JWKS (``{"keys": [...]}``), one JWK, a list of JWKs, or a PEM public key.
CardKeys = Mapping[str, Any] | Sequence[Mapping[str, Any]] | str | bytes


def _kid(signature: Any) -> Any:
    with contextlib.suppress(jwt.PyJWTError, AttributeError, TypeError):
        return jwt.get_unverified_header(str(signature.get("protected", "")) + "..").get("kid")
    return None


class CardVerifier:
    """Checks card signatures for one agent; keys are loaded once and refreshed on a miss."""

    def __init__(
        self, http: httpx.AsyncClient, base_url: str, keys: CardKeys | None = None
    ) -> None:
        self._http = http
        self._jwks_url = base_url.rstrip("/") + JWKS_PATH
        self._given = keys
        # Keys the caller gives are checked now, so a bad one fails where it is configured.
        self._keys: dict[str | None, Any] | None = _parse_keys(keys) if keys is not None else None

    async def verify(self, card: Mapping[str, Any]) -> dict[str, Any]:
        """The signed view of *card*; raise :class:`CardVerificationError` if it does not verify."""
        signatures = card.get("signatures")
        if not isinstance(signatures, list) or not signatures:
            raise CardVerificationError("the agent card is not signed", reason="missing")
        kids = {_kid(s) for s in signatures}
        if self._keys is None or (self._given is None and not any(k in self._keys for k in kids)):
            # First use, or a kid we have not seen: the agent may have rotated its key.
            self._keys = _parse_keys(await self._fetch_jwks())
        keys = self._keys
        try:
            as_sdk_reads = parse_agent_card(copy.deepcopy(dict(card)))
            as_strict_reads = ParseDict(
                copy.deepcopy(dict(card)), AgentCard(), ignore_unknown_fields=True
            )
        except Exception as exc:  # a card the SDK cannot even parse has nothing to verify
            raise CardVerificationError(
                f"the agent card cannot be read for verification: {type(exc).__name__}",
                reason="invalid",
            ) from None

        def provider(kid: str | None, jku: str | None) -> Any:
            key = keys.get(kid) if kid in keys else keys.get(None)
            if key is None:
                raise jwt.PyJWKError(f"no key for kid {kid!r}")
            return key

        verify = create_signature_verifier(provider, ALGORITHMS)
        for view in (as_sdk_reads, as_strict_reads):
            try:
                verify(view)
            except SignatureVerificationError:
                known = any(k in keys for k in kids) or None in keys
                source = "the keys given" if self._given is not None else self._jwks_url
                raise CardVerificationError(
                    "no signature on the agent card verifies: the card was changed after "
                    "it was signed, or signed with another key"
                    if known
                    else f"the agent card is signed with a key not in {source}",
                    reason="invalid" if known else "unknown_key",
                ) from None
        signed: dict[str, Any] = MessageToDict(as_sdk_reads)
        return signed

    async def _fetch_jwks(self) -> Mapping[str, Any]:
        """The agent's key set; :class:`CardVerificationError` (``no_keys``) when what it
        answers is no usable one (a failed connection: :class:`A2AConnectionError`)."""
        try:
            response, body, whole = await get_at_most(self._http, self._jwks_url, _MAX_JWKS_BYTES)
        except httpx.DecodingError:  # reached: what it answered is no key set
            problem = "cannot be decoded (not in its content encoding)"
        else:
            document = parse_json(body)[0]
            if response.status_code != 200:
                problem = f"answers HTTP {response.status_code}"
            elif not whole:
                problem = f"is larger than {_MAX_JWKS_BYTES} bytes"
            elif not isinstance(document, Mapping):
                problem = "is not a JWKS (a JSON object)"
            else:
                return document
        raise CardVerificationError(f"the key set at {self._jwks_url} {problem}", reason="no_keys")


def _parse_keys(given: CardKeys | Mapping[str, Any]) -> dict[str | None, Any]:
    """``{kid: PyJWK}`` (a PEM key, which has no kid, is stored under ``None``)."""
    if isinstance(given, str | bytes):
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_public_key

        pem = given.encode() if isinstance(given, str) else given
        try:
            public = load_pem_public_key(pem)
        except ValueError as exc:
            raise ValueError(f"card_keys is not a usable PEM public key: {exc}") from None
        if not isinstance(
            public, ec.EllipticCurvePublicKey | rsa.RSAPublicKey | ed25519.Ed25519PublicKey
        ):
            raise ValueError(f"card_keys: unsupported key type {type(public).__name__}")
        return {None: pem}  # PyJWT loads it for the algorithm each signature names
    if isinstance(given, Mapping):
        given = given["keys"] if isinstance(given.get("keys"), list) else [given]
    keys: dict[str | None, Any] = {}
    for member in given:
        if not isinstance(member, Mapping) or member.get("kty") == "oct" or "d" in member:
            continue  # secrets and private keys have no place in a verification key set
        if member.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(dict(member))
        except (jwt.PyJWTError, ValueError, TypeError):
            continue
        kid = member.get("kid")
        keys[kid if isinstance(kid, str) else None] = key
    if not keys:
        raise CardVerificationError("no usable public signature keys", reason="no_keys")
    return keys


Protocol = Literal["auto", "1.0", "0.3"]
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Endpoint(NamedTuple):
    """The interface a call goes to (a gRPC ``url`` is ``host:port``; ``secure``: TLS)."""

    binding: str
    version: str
    url: str
    secure: bool = False


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of an http(s) URL, the port filled in; else ``None``."""
    parts = urlsplit(url)  # scheme and hostname come lowercased
    if parts.scheme in _DEFAULT_PORTS and parts.hostname:
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        with contextlib.suppress(ValueError):  # a port out of range
            return f"{parts.scheme}://{host}:{parts.port or _DEFAULT_PORTS[parts.scheme]}"
    return None


def check_endpoint(url: str, base: str, *, allow_other_origins: bool, direct: bool) -> str:
    """The URL to call for a card's *url*: resolved against *base*; in direct mode (no
    network) moved onto *base*'s origin; else refused on another origin unless allowed."""
    resolved = urljoin(base + "/", url)
    if direct:
        home = urlsplit(base)
        return urlsplit(resolved)._replace(scheme=home.scheme, netloc=home.netloc).geturl()
    parts = urlsplit(resolved)
    if "@" in parts.netloc:
        # httpx would send them as basic auth in place of the caller's own credentials
        # (the call made as whoever the card chose), and messages would repeat them.
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        raise A2ADiscoveryError(
            f"the agent card names {echoed(shown)} with credentials in it (user:password@): "
            "it is not followed"
        )
    agent, target = origin_of(base), origin_of(resolved)
    if target == agent or (allow_other_origins and target is not None):
        try:
            _ = httpx.URL(resolved).host  # as the transports read it (IDNA decoded too)
        except (httpx.InvalidURL, ValueError) as exc:
            raise A2ADiscoveryError(
                f"the agent card names {echoed(resolved)}, which is no usable URL ({exc})"
            ) from None
        if target != agent:
            _outward(resolved, parts.hostname or "", base)
        return resolved
    downgrade = str(agent).startswith("https:") and str(target).startswith("http:")
    raise CrossOriginEndpointError(
        f"the agent card names {resolved} ({target or 'no http(s) origin'}), which is not "
        f"the agent's origin {agent}"
        + (" (https downgraded to http)" if downgrade else "")
        + "; pass allow_other_origins=True to follow it (credentials are never sent there)",
        url=resolved,
        agent_origin=str(agent),
    )


def _outward(url: str, host: str, base: str) -> None:
    """Refuse another origin's *url* whose *host* is an address further in (:func:`inward`)."""
    reason = inward(url, "is a", host, host_class(host), base, agents_class(base))
    if reason is not None:
        raise CrossOriginEndpointError(reason, url=url, agent_origin=str(origin_of(base)))


def _host_port(target: str) -> bool:
    """Whether *target* is a plain ``host[:port]``: a name or IP address (no user, path or
    query), and a port from 1 to 65535 if any."""
    where = urlsplit("//" + target)
    try:
        port = where.port
    except ValueError:  # a port out of range, or no number
        return False
    return bool(where.hostname) and where.netloc == target and "@" not in target and port != 0


def _grpc_endpoint(version: str, url: str, base: str, allow_other_origins: bool) -> Endpoint:
    """Host only, not origin (gRPC has its own port), but plaintext under an https agent is
    another origin; TLS when the address says so or,
    scheme-less, when the agent URL is https. Only ``host[:port]``: gRPC reads other
    addresses its own way (``unix:NAME@HOST`` is a local socket, whatever ``HOST`` says)."""
    scheme, _, target = url.rpartition("://")
    target = target.rstrip("/")
    home = urlsplit(base)
    secure = scheme.lower() in ("https", "grpcs") or (not scheme and home.scheme == "https")
    endpoint = Endpoint("GRPC", version, target, secure)
    follow = "pass allow_other_origins=True to follow it (credentials are never sent there)"
    if not _host_port(target):
        problem = "is no host:port"
    elif own_grpc_host(endpoint, base):
        return endpoint
    elif allow_other_origins:  # gRPC reads the target as a URI, percent-decoded
        _outward(url, unquote(urlsplit("//" + target).hostname or ""), base)
        return endpoint
    elif urlsplit("//" + target).hostname != home.hostname:
        problem = f"is not on the agent's host {home.hostname}; {follow}"
    else:
        problem = f"is plaintext under the https agent {base}; {follow}"
    raise CrossOriginEndpointError(
        f"the agent card names the gRPC address {url}, which {problem}",
        url=url,
        agent_origin=str(origin_of(base)),
    )


def own_grpc_host(endpoint: Endpoint, base: str) -> bool:
    """Whether the gRPC *endpoint* is the agent's own, which gets the caller's credentials:
    on the host of *base*, and over TLS when *base* is https (``http://`` under
    ``https://`` is another origin, as for HTTP: the credentials would go readable)."""
    home = urlsplit(base)
    same_host = urlsplit("//" + endpoint.url).hostname == home.hostname
    return same_host and (endpoint.secure or home.scheme != "https")


def objects(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a card's list member (a member of another type lists nothing)."""
    return [i for i in value if isinstance(i, Mapping)] if isinstance(value, list) else []


def extension(card: Mapping[str, Any], uri: str) -> Mapping[str, Any] | None:
    """The card's ``capabilities.extensions`` entry of *uri*, if it declares one (a member
    of the wrong type declares nothing)."""
    capabilities = card.get("capabilities")
    found = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return next((e for e in objects(found) if e.get("uri") == uri), None)


def _offered(card: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(binding, major version, url) of every interface the card names, 1.0 and 0.3 keys."""
    pairs = [
        (i.get("protocolBinding"), str(i.get("protocolVersion") or "0"), i.get("url"))
        for i in objects(card.get("supportedInterfaces"))
    ]  # an unversioned interface is a 0.3-era declaration (the SDK reads it that way too)
    pairs.append((card.get("preferredTransport") or "JSONRPC", "0", card.get("url")))
    pairs += [
        (i.get("transport"), "0", i.get("url")) for i in objects(card.get("additionalInterfaces"))
    ]
    return [(str(b).upper(), v.split(".")[0], str(u)) for b, v, u in pairs if b and u]


def select_endpoint(
    card: Mapping[str, Any] | None,
    base: str,
    protocol: Protocol,
    *,
    allow_other_origins: bool,
    direct: bool,
) -> Endpoint:
    """JSON-RPC when the card offers it, else HTTP+JSON, else gRPC (not in direct mode);
    ``auto`` prefers 1.0; a pinned version without a matching interface posts JSON-RPC
    to *base*."""
    offered = _offered(card) if card else []
    for binding in ("JSONRPC", "HTTP+JSON") if direct else ("JSONRPC", "HTTP+JSON", "GRPC"):
        for version in ("1.0", "0.3") if protocol == "auto" else (protocol,):
            for name, major, url in offered:
                if (name, major) != (binding, version[0]):
                    continue
                if binding == "GRPC":
                    return _grpc_endpoint(version, url, base, allow_other_origins)
                checked = check_endpoint(
                    url, base, allow_other_origins=allow_other_origins, direct=direct
                )
                return Endpoint(binding, version, checked)
    if protocol == "auto" and offered:
        bindings = ", ".join(sorted({name for name, _, _ in offered}))
        where = "in-process " if direct else ""
        raise A2ADiscoveryError(
            f"the agent offers no interface this {where}client speaks (only {bindings})"
        )
    return Endpoint("JSONRPC", "0.3" if protocol == "auto" else protocol, base)
