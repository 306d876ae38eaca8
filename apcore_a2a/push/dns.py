"""Webhook host-name lookups that end when nobody waits for them any more (c-ares).

``socket.getaddrinfo`` cannot be cancelled: a name whose DNS never answers held a thread
until the system resolver gave up, whoever still waited, and the agent's exit waited for
it too. c-ares (through ``pycares``) reads the same configuration as the system resolver
(``/etc/hosts``, ``/etc/nsswitch.conf``, ``/etc/resolv.conf`` with its ``search`` list
and ``ndots``), so ``localhost``, ``host.docker.internal`` and Kubernetes service names
resolve as before; its queries go out on sockets the event loop watches. A stuck name
costs a pending query and its socket, no thread, and cancelling the lookup ends its
queries at once: no retry goes out after it.

Each lookup has a c-ares channel of its own, because c-ares cancels only a whole channel
(``ares_cancel``); a channel reads the configuration when it is made, so a changed
``resolv.conf`` counts from the next lookup on.

c-ares needs a loop that watches sockets (``add_reader``/``add_writer``); one that cannot
(Windows' default ``ProactorEventLoop`` raises ``NotImplementedError``) would leave every
lookup needing DNS unanswered until ``push_timeout``, its webhook refused. On such a loop
(found at its first lookup, remembered per loop) names are looked up on the system
resolver (``getaddrinfo``) on a few threads of the resolver's own, said once at WARNING: a
stuck lookup then holds one of them until the system resolver gives up, as before c-ares.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pycares

__all__ = ["AresResolver"]

logger = logging.getLogger(__name__)

#: Threads looking names up on a loop that cannot watch sockets (further lookups queue).
FALLBACK_THREADS = 8


class AresResolver:
    """``resolve(host, port) -> addresses`` on c-ares, cancellable (the default resolver
    of :class:`~apcore_a2a.push.policy.PushUrlPolicy`).

    *nameservers* (``"192.0.2.53"``, ``"192.0.2.53:5353"``, ``"[2001:db8::53]:53"``)
    replace the name servers of ``/etc/resolv.conf``; its search list and ``ndots`` still
    apply, and ``/etc/hosts`` is read first. *timeout* (seconds a name server has to answer
    one try) and *tries* replace c-ares's defaults (``resolv.conf``'s ``timeout`` and
    ``attempts`` options, else 2 s and 3 tries with growing timeouts)."""

    def __init__(
        self,
        nameservers: Sequence[str] = (),
        *,
        timeout: float | None = None,
        tries: int | None = None,
    ) -> None:
        self.nameservers = tuple(nameservers)
        self.timeout = timeout
        self.tries = tries
        self._lookups: set[_Lookup] = set()
        #: Loops known to watch sockets (True) or not (False).
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, bool] = (
            weakref.WeakKeyDictionary()
        )
        self._pool: ThreadPoolExecutor | None = None

    @property
    def pending(self) -> int:
        """Lookups in flight: each has its queries out and waits for their answers."""
        return len(self._lookups)

    async def __call__(self, host: str, port: int) -> list[str]:
        """The addresses *host* has for a TCP connection to *port*; ``socket.gaierror``
        when it has none. Cancelling the call cancels its queries."""
        loop = asyncio.get_running_loop()
        if not self._watches_sockets(loop):
            return await self._system_lookup(loop, host, port)
        lookup = _Lookup(self, loop)
        self._lookups.add(lookup)
        try:
            lookup.start(host, port)
            answer = await lookup.answer
        finally:
            self._lookups.discard(lookup)
            lookup.end()
        return [node.addr[0].decode() for node in answer.nodes]

    def close(self) -> None:
        """End every lookup in flight now (their callers get ``socket.gaierror``): nothing
        of c-ares is left running for the event loop or the process to wait for (a system
        lookup, on a loop that cannot watch sockets, runs until the system resolver
        answers)."""
        for lookup in list(self._lookups):
            lookup.end()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def _watches_sockets(self, loop: asyncio.AbstractEventLoop) -> bool:
        known = self._loops.get(loop)
        if known is not None:
            return known
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                loop.add_reader(probe.fileno(), _nothing)
                loop.remove_reader(probe.fileno())
                loop.add_writer(probe.fileno(), _nothing)
                loop.remove_writer(probe.fileno())
                watches = True
            except NotImplementedError:
                watches = False
        self._loops[loop] = watches
        if not watches:
            logger.warning(
                "push: the event loop (%s) cannot watch sockets, so webhook names are looked "
                "up on the system resolver, on at most %d threads (push_dns_servers is not "
                "used); a name whose DNS does not answer holds a thread until the system "
                "resolver gives up",
                type(loop).__name__,
                FALLBACK_THREADS,
            )
        return watches

    async def _system_lookup(
        self, loop: asyncio.AbstractEventLoop, host: str, port: int
    ) -> list[str]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(FALLBACK_THREADS, thread_name_prefix="push-dns")
        try:
            infos = await loop.run_in_executor(
                self._pool, socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM
            )
        except UnicodeError as exc:  # a name IDNA cannot encode: no address, as for c-ares
            raise socket.gaierror(f"host name cannot be looked up: {exc}") from None
        return [str(info[4][0]) for info in infos]


def _nothing() -> None:
    """The probe's callback: it is removed before the loop could call it."""


class _Lookup:
    """One lookup's channel, its sockets watched by the event loop."""

    def __init__(self, resolver: AresResolver, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.answer: asyncio.Future[pycares.AddrInfoResult] = loop.create_future()
        self._readers: set[int] = set()
        self._writers: set[int] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._ended = False
        # pycares destroys a closed channel on its own thread, which holds the last one's
        # socket callback until the next close: a weak one keeps nothing of this call.
        lookup = weakref.ref(self)

        def sockets(fd: int, readable: bool, writable: bool) -> None:
            if (alive := lookup()) is not None:
                alive._sockets(fd, readable, writable)

        try:
            self._channel = pycares.Channel(
                sock_state_cb=sockets,
                servers=resolver.nameservers or None,
                timeout=resolver.timeout,
                tries=resolver.tries,
            )
        except pycares.AresError as exc:
            raise socket.gaierror(f"DNS resolver could not start: {exc}") from None

    def start(self, host: str, port: int) -> None:
        try:
            self._channel.getaddrinfo(host, port, type=socket.SOCK_STREAM, callback=self._done)
        except (pycares.AresError, UnicodeError, RuntimeError) as exc:
            # A name c-ares cannot encode (IDNA) or take: no address, as for the system's.
            raise socket.gaierror(f"host name cannot be looked up: {exc}") from None
        self._wake()

    def _done(self, result: pycares.AddrInfoResult | None, error: int | None) -> None:
        if self.answer.done():
            return
        if result is None:
            reason = pycares.errno.errorcode.get(error or 0, "no answer")
            self.answer.set_exception(socket.gaierror(f"DNS lookup failed: {reason}"))
        else:
            self.answer.set_result(result)

    def _sockets(self, fd: int, readable: bool, writable: bool) -> None:
        # c-ares names the sockets it waits on. After end() the channel is destroyed on
        # pycares's own thread, which may report its sockets closed: the loop is not
        # touched from there.
        if self._ended:
            return
        self._watch(fd, readable, writing=False)
        self._watch(fd, writable, writing=True)

    def _watch(self, fd: int, wanted: bool, *, writing: bool) -> None:
        watched = self._writers if writing else self._readers
        if wanted == (fd in watched):
            return
        if wanted:
            add = self._loop.add_writer if writing else self._loop.add_reader
            add(fd, self._ready, fd, writing)
            watched.add(fd)
        else:
            remove = self._loop.remove_writer if writing else self._loop.remove_reader
            remove(fd)
            watched.discard(fd)

    def _ready(self, fd: int, writable: bool) -> None:
        if writable:
            self._channel.process_write_fd(fd)
        else:
            self._channel.process_read_fd(fd)
        self._wake()

    def _wake(self) -> None:
        """Let c-ares act on its timeouts (a try's end, the next server, a retry) when
        the next one is due."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._ended or self.answer.done():
            return
        due = self._channel.timeout()  # type: ignore[no-untyped-call]  # pycares: untyped
        self._timer = self._loop.call_later(due, self._expired)

    def _expired(self) -> None:
        self._timer = None
        self._channel.process_fd(pycares.ARES_SOCKET_BAD, pycares.ARES_SOCKET_BAD)
        self._wake()

    def end(self) -> None:
        """Cancel the queries still out (so no retry is sent), stop watching the sockets,
        and let pycares destroy the channel."""
        if self._ended:
            return
        if self._timer is not None:
            self._timer.cancel()
        # On the loop's thread, while the loop still watches: c-ares answers the queries
        # ECANCELLED and closes their sockets here.
        self._channel.cancel()
        self._ended = True
        for fd in self._readers:
            self._loop.remove_reader(fd)
        for fd in self._writers:
            self._loop.remove_writer(fd)
        self._channel.close()
