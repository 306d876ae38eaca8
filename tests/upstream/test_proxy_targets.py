"""Tripwire of ``upstream/proxy_targets.py``: httpcore 1.0.9 names an IPv6 literal to an
HTTP proxy without its brackets, ``CONNECT ::1:PORT`` (and ``Host: ::1:PORT``) for https and
``GET http://::1:PORT/k`` for plain http.

The day httpcore brackets them itself, ``test_httpcore_names_an_ipv6_literal_without_brackets``
fails and the correction can go. Its effect through the agent's egress (push deliveries, the
JWKS fetch) is in ``tests/push/test_push_proxy.py`` and ``tests/auth/test_jwks_proxy.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from apcore_a2a.upstream.proxy_targets import bracketed
from tests._support import TLS


@contextlib.asynccontextmanager
async def _refusing_proxy() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A proxy on 127.0.0.1 that records each request head it is sent and answers 400."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", heads
    finally:
        server.close()


async def _ask(url: str, *, corrected: bool) -> list[bytes]:
    """The request head the proxy is sent for a GET of *url* (its request line, its Host)."""
    async with (
        _refusing_proxy() as (proxy, heads),
        httpx.AsyncClient(proxy=proxy, trust_env=False, verify=TLS) as http,
    ):
        request = http.build_request("GET", url)
        with contextlib.suppress(httpx.ProxyError):
            await http.send(bracketed(request) if corrected else request)
    [head] = heads
    lines = head.split(b"\r\n")
    return [lines[0], *(line for line in lines if line.lower().startswith(b"host:"))]


@pytest.mark.parametrize(
    ("url", "asked"),
    [
        ("https://[::1]:4443/k", [b"CONNECT ::1:4443 HTTP/1.1", b"Host: ::1:4443"]),
        ("http://[::1]:8080/k", [b"GET http://::1:8080/k HTTP/1.1", b"Host: [::1]:8080"]),
        ("http://[2001:db8::1]/k", [b"GET http://2001:db8::1/k HTTP/1.1", b"Host: [2001:db8::1]"]),
    ],
)
async def test_httpcore_names_an_ipv6_literal_without_brackets(
    url: str, asked: list[bytes]
) -> None:
    assert await _ask(url, corrected=False) == asked


@pytest.mark.parametrize(
    ("url", "asked"),
    [
        ("https://[::1]:4443/k", [b"CONNECT [::1]:4443 HTTP/1.1", b"Host: [::1]:4443"]),
        ("https://[::1]/k", [b"CONNECT [::1]:443 HTTP/1.1", b"Host: [::1]:443"]),
        ("http://[::1]:8080/k?q=1", [b"GET http://[::1]:8080/k?q=1 HTTP/1.1", b"Host: [::1]:8080"]),
        (
            "http://[2001:db8::1]/k",
            [b"GET http://[2001:db8::1]/k HTTP/1.1", b"Host: [2001:db8::1]"],
        ),
        ("https://127.0.0.1:4443/k", [b"CONNECT 127.0.0.1:4443 HTTP/1.1", b"Host: 127.0.0.1:4443"]),
        (
            "http://a.example:8080/k",
            [b"GET http://a.example:8080/k HTTP/1.1", b"Host: a.example:8080"],
        ),
    ],
)
async def test_the_correction_brackets_an_ipv6_literal_and_nothing_else(
    url: str, asked: list[bytes]
) -> None:
    assert await _ask(url, corrected=True) == asked


async def test_a_callers_own_trace_still_runs() -> None:
    events: list[str] = []

    async def own(event: str, _info: object) -> None:
        events.append(event)

    async with (
        _refusing_proxy() as (proxy, heads),
        httpx.AsyncClient(proxy=proxy, trust_env=False, verify=TLS) as http,
    ):
        request = http.build_request("GET", "http://[::1]:8080/k", extensions={"trace": own})
        await http.send(bracketed(request))
    assert heads[0].startswith(b"GET http://[::1]:8080/k ")
    assert "http11.send_request_headers.started" in events
