"""Which webhook URLs the agent may POST to (SSRF policy, table in docs/push.md).

A push config names a URL the *agent* will call, so a caller could aim it at its own
network (the metadata service, a database on localhost, an admin panel on a private
range). The URL is checked at registration (``-32602``) and before every delivery attempt
(DNS answers change), and the sender connects to the very address checked: resolving the
name again could give another answer (DNS rebinding). Where the environment names an egress
proxy for the URL (``_proxies.proxy_for``), the check is of what this host resolves, a name
it cannot resolve being the proxy's to reach, and the POST goes through the proxy by name.

Example: ``await PushUrlPolicy().check("https://127.0.0.1/hook")`` is
``"loopback address (127.0.0.1)"``; ``None`` means allowed.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import re
import urllib.parse
from typing import NamedTuple

import httpx
from a2a.utils.errors import InvalidParamsError

from apcore_a2a._addresses import METADATA, IPAddress, embedded_ipv4
from apcore_a2a._egress import Resolver, Unresolvable, Unresolved, Unusable, lookup
from apcore_a2a._proxies import proxy_for
from apcore_a2a._text import echoed
from apcore_a2a.edge.call import CallRecord
from apcore_a2a.push.dns import AresResolver
from apcore_a2a.push.lookups import LOOKUPS_PER_CALLER, FairLookups

logger = logging.getLogger("apcore_a2a.push")

__all__ = ["LOOKUPS_PER_CALLER", "AresResolver", "Checked", "PushUrlPolicy", "Resolver"]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
#: The longest URL the sender's HTTP client (httpx) sends.
MAX_URL_CHARS = 65536
# urlsplit drops tabs and line breaks before parsing (WHATWG); the sender's client refuses
# every control character, so such a URL would be checked as one URL and never sent.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _classify(addr: IPAddress, *, allow_loopback: bool) -> str | None:
    """The reason an address is not a public unicast destination, or ``None``."""
    embedded = embedded_ipv4(addr)
    if embedded is not None:
        # Judge the address the packets are finally delivered to, not the wrapper.
        kind, inner = embedded
        for ipv4 in inner:
            reason = _classify(ipv4, allow_loopback=allow_loopback)
            if reason is not None:
                return reason if kind == "IPv4-mapped" else f"{reason} inside {kind} {addr}"
        return None
    if addr.is_loopback:
        return None if allow_loopback else f"loopback address ({addr})"
    for refused, reason in (
        (addr in METADATA, "cloud metadata service address ({})"),
        (addr.is_unspecified, "unspecified address ({})"),
        (addr.is_link_local, "link-local address ({})"),
        (addr.version == 6 and addr.is_site_local, "site-local address ({}, deprecated fec0::/10)"),
        (addr.version == 4 and addr in _CGNAT, "carrier-grade NAT address ({}, 100.64.0.0/10)"),
        (addr.is_multicast, "multicast address ({})"),
        (addr.is_reserved, "reserved address ({})"),
        (addr.is_private, "private address ({})"),
        (not addr.is_global, "non-public address ({})"),
    ):
        if refused:
            return reason.format(addr)
    return None


class Checked(NamedTuple):
    """What the policy found for a URL: why it is refused (``None``: it may be called), the
    checked addresses to connect to, in the resolver's order, and the proxy the environment
    names for it, which the POST goes through by name (no address then needs to be known:
    a name this host cannot resolve is the proxy's to reach)."""

    refused: str | None
    addresses: list[str]
    proxy: str | None = None
    #: The refusal is of a name that did not resolve now (its lookup failed or timed out):
    #: a delivery tries it again, as after a connection failure. An answer that is no
    #: address is refused for good.
    unresolved: bool = False


class PushUrlPolicy:
    """SSRF policy for webhook URLs: only ``https`` to hosts resolving exclusively to public
    unicast addresses; ``allow_insecure=True`` (development, tests) adds ``http`` and
    loopback, nothing else (private, link-local, CGNAT, multicast, metadata stay refused).

    *resolver* (``resolve(host, port) -> addresses``) replaces the default, an
    :class:`AresResolver` reading the system's configuration; the policy shares either
    fairly between callers and cancels a lookup nobody waits for (``push/lookups.py``)."""

    def __init__(
        self,
        *,
        allow_insecure: bool = False,
        resolver: Resolver | None = None,
        lookup_timeout: float = 10.0,
    ) -> None:
        self.allow_insecure = allow_insecure
        self._resolver = resolver or AresResolver()
        self._lookups_fairly = FairLookups(self._resolver)
        #: Seconds a host name may take to resolve (``push_timeout``); then it is refused.
        self.lookup_timeout = lookup_timeout

    def close(self) -> None:
        """End every lookup in flight, at once: nothing is left to wait for. Their URLs
        are refused as unresolvable (another resolver's lookups are cancelled)."""
        if isinstance(self._resolver, AresResolver):
            self._resolver.close()
        else:
            self._lookups_fairly.cancel()

    async def check(self, url: str, caller: str = "") -> str | None:
        """Return why *url* is refused, or ``None`` when it may be called."""
        return (await self.resolve(url, caller)).refused

    async def resolve(self, url: str, caller: str = "") -> Checked:
        """*url* checked: its refusal, or the addresses to connect to (never a second
        lookup: DNS rebinding) and the proxy to send through (read from the environment
        now). A host-name lookup counts against *caller* (a quota key; ``""``: callers
        nobody named share one)."""
        try:
            proxy = proxy_for(httpx.URL(url))
        except (ValueError, httpx.InvalidURL):
            proxy = None  # refused below
        return (await self._check(url, caller, proxied=proxy is not None))._replace(proxy=proxy)

    async def _check(self, url: str, caller: str, *, proxied: bool) -> Checked:
        if _CONTROL.search(url):
            return Checked("URL contains a control character", [])
        if len(url) > MAX_URL_CHARS:
            return Checked(f"URL is longer than {MAX_URL_CHARS} characters", [])
        try:
            parsed = urllib.parse.urlsplit(url)
            port = parsed.port
            httpx.URL(url)  # what the sender will parse
        except (ValueError, httpx.InvalidURL):
            return Checked("URL cannot be parsed", [])
        scheme = parsed.scheme.lower()
        if scheme not in ("http", "https"):
            shown = echoed(scheme or "(none)", quote=True)
            return Checked(f"URL scheme {shown} is not allowed; use https", [])
        if scheme == "http" and not self.allow_insecure:
            return Checked("only https URLs are allowed", [])
        host = parsed.hostname
        if not host:
            return Checked("URL has no host", [])
        shown = echoed(host, quote=True)
        if parsed.username is not None or parsed.password is not None:
            # Credentials in the URL would be sent to the receiver and end up in logs.
            return Checked("URL must not contain credentials", [])
        try:
            literal = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            pass
        else:
            reason = _classify(literal, allow_loopback=self.allow_insecure)
            return Checked(reason, [] if reason else [str(literal)])
        # A failed lookup is "unresolved" (a delivery tries again), an unusable answer is
        # refused (no retry makes it an address); a name a proxy is to reach passes with no
        # address.
        fairly = functools.partial(self._lookups_fairly.lookup, caller=caller)
        deadline = asyncio.get_running_loop().time() + self.lookup_timeout
        try:
            found = await lookup(fairly, host, port or (443 if scheme == "https" else 80), deadline)
        except httpx.ConnectTimeout:
            problem = f"could not be resolved within {self.lookup_timeout:g} s"
        except Unresolvable as exc:
            if proxied and isinstance(exc, Unresolved):
                return Checked(None, [])
            if isinstance(exc, Unusable):
                return Checked(f"host {shown} {exc.problem}", [])
            problem = exc.problem
        else:
            allow = self.allow_insecure
            reasons = [r for a in found if (r := _classify(a, allow_loopback=allow))]
            if not reasons:
                return Checked(None, [str(a) for a in found])
            # Told to the caller, the address would map the agent's internal names for it
            # (which address the database host has): the operator's log has it.
            logger.info("push URL host %s resolves to %s", shown, reasons[0])
            return Checked(f"host {shown} resolves to a non-public address", [])
        return Checked(f"host {shown} {problem}", [], unresolved=True)

    async def validate(self, url: str, caller: str) -> None:
        """Refuse *url* of a push config *caller* sends: ``InvalidParamsError`` (-32602)
        with the reason."""
        reason = await self.check(url, caller)
        if reason is None:
            return
        # The URL is the caller's text: one bounded line, whatever it holds.
        logger.info("refused push notification URL %s: %s", echoed(url), reason)
        raise InvalidParamsError(message=f"Invalid push notification URL: {reason}")

    async def validate_call(self, url: str, call: CallRecord) -> None:
        """:meth:`validate` of the push config *call* sends, its host-name lookup counted
        against the call's caller (``push/lookups.py``) while its client is there: a client
        that hangs up ends the check, so a lookup nobody else waits for ends with it and the
        caller's lookup slot comes back then, not at ``push_timeout``."""
        check = self.validate(url, call.caller)
        if call.client_gone is None:
            await check
            return
        checking, gone = asyncio.ensure_future(check), asyncio.ensure_future(call.client_gone())
        try:
            await asyncio.wait((checking, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            checking.cancel()
            gone.cancel()
            await asyncio.gather(checking, gone, return_exceptions=True)
        if checking.cancelled():  # nobody is left to answer: a refusal, for the logs
            raise InvalidParamsError(
                message="Invalid push notification URL: the client hung up before it was checked"
            )
        checking.result()  # the policy's refusal, if any
