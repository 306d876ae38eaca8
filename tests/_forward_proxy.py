"""An HTTP forward proxy on 127.0.0.1, as an egress proxy stands between an agent and the
servers it calls (an identity provider, a webhook receiver): ``CONNECT host:port`` tunnels
(https) and absolute-form requests (``GET http://host:port/path``, plain http). It resolves
names itself, from its own table (the agent's host may resolve none of them), and records
each request line it is asked. It reads a target as a proxy must (RFC 9110 §9.3.6, RFC 3986
§3.2.2): an IPv6 host in brackets, else ``400 Bad Request`` (``CONNECT 2001:db8::1:443``
names no one port)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import httpx
import pytest


class ForwardProxy:
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.asked: list[str] = []
        #: the Proxy-Authorization of each request that sent one
        self.credentials: list[str] = []
        self.url = ""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, _, headers = head.partition(b"\r\n")
            method, target, version = line.decode("ascii").split(" ")
            self.asked.append(f"{method} {target}")
            for field in headers.split(b"\r\n"):
                name, _, value = field.partition(b":")
                if name.strip().lower() == b"proxy-authorization":
                    self.credentials.append(value.strip().decode("latin-1"))
            if method == "CONNECT":
                host, port = _authority(target)
                first = b""
            else:
                url = httpx.URL(target)
                host, port = url.host, url.port or 80
                first = f"{method} {url.raw_path.decode()} {version}\r\n".encode() + headers
        except (ValueError, httpx.InvalidURL, asyncio.IncompleteReadError):
            writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            writer.close()
            return
        except asyncio.LimitOverrunError:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.names.get(host, host), port)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            writer.close()
            return
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        up_writer.write(first)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def _authority(target: str) -> tuple[str, int]:
    """The host and port of a ``CONNECT`` target; ``ValueError`` for an IPv6 host without
    its brackets, or no port."""
    if target.startswith("["):
        host, bracket, port = target[1:].partition("]:")
        if not bracket:
            raise ValueError(f"no port after {target!r}")
    else:
        host, _, port = target.rpartition(":")
        if ":" in host:
            raise ValueError(f"an IPv6 host without brackets: {target!r}")
    return host, int(port)


@contextlib.asynccontextmanager
async def forward_proxy(names: dict[str, str]) -> AsyncIterator[ForwardProxy]:
    proxy = ForwardProxy(names)
    server = await asyncio.start_server(proxy._handle, "127.0.0.1", 0)
    proxy.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield proxy
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)


def without_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy settings from the environment the tests run in (each case sets its own)."""
    for name in [n for n in os.environ if n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
