"""Whether a request was answered any bytes before its connection closed (:func:`received`),
on the transports :func:`counting` marks (``_egress.NamePools``'): a request that went
out on a kept connection is sent again only when the server closed it before answering
anything (its idle timeout met the request on the way), not when it sent part of an
answer's head and then closed (it took the request, and may have acted on it).

httpcore 1.0.9 raises the same ``RemoteProtocolError("Server disconnected without sending
a response.")`` for both, and no public hook says how much a connection read. So the
transport's connection pool reads through a network backend (httpcore's public
``AsyncNetworkBackend``, set in its private ``_network_backend``, on httpx's private
``_pool``) whose streams add what each read gives to a counter of the task reading
(a context variable :func:`received` sets around one request): nothing process-wide.
"""

from __future__ import annotations

import contextlib
import ssl
import typing
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar

import httpcore
import httpx

_T = typing.TypeVar("_T", bound=httpx.AsyncHTTPTransport)
#: Bytes read for the request in flight in this context (``None``: none counted).
_COUNT: ContextVar[list[int] | None] = ContextVar("apcore_a2a_received_bytes", default=None)


@contextlib.contextmanager
def received() -> Iterator[Callable[[], int]]:
    """While in it, a function saying how many bytes the connections of :func:`counting`
    transports have read for this context's requests (an answer's head and body)."""
    count = [0]
    token = _COUNT.set(count)
    try:
        yield lambda: count[0]
    finally:
        _COUNT.reset(token)


def counting(transport: _T) -> _T:
    """*transport* with its connections' reads counted for :func:`received` (direct, or
    through an HTTP or SOCKS proxy: every httpcore pool keeps its backend there)."""
    pool = transport._pool
    pool._network_backend = _Counting(pool._network_backend)
    return transport


class _Counted(httpcore.AsyncNetworkStream):
    """A connection's stream whose reads are counted in the reading context (httpcore's
    signatures, *timeout* included)."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        data = await self._stream.read(max_bytes, timeout)
        count = _COUNT.get()
        if count is not None:
            count[0] += len(data)
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        return _Counted(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _Counting(httpcore.AsyncNetworkBackend):
    """A pool's network backend whose streams are :class:`_Counted`."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return _Counted(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Counted(await self._backend.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)
