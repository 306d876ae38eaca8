"""A request to an IPv6 literal through an HTTP proxy names its host in brackets.

httpcore 1.0.9 builds what it asks a proxy from the host httpx hands it, which has no
brackets (``httpx.URL.raw_host``): ``CONNECT 2001:db8::1:443`` with that ``Host`` header
(https), and ``POST http://2001:db8::1:8080/hook`` (plain http, absolute-form). Neither says
which colon starts the port (RFC 9110 §9.3.6 and RFC 3986 §3.2.2 require
``[2001:db8::1]:443``): a proxy refuses it (400) or reads another host and port. No
parameter of httpx or httpcore sets that target, so the correction is httpcore's public
``trace`` request extension, which it calls with the request it is about to write
(``http11.send_request_headers.started``): there a ``CONNECT`` target and its ``Host``
header, or an absolute-form target, that names *this* request's host without brackets get
them. The request sent on through the tunnel (origin-form, ``/hook``) and one sent without a
proxy are not touched, nor is one httpcore already brackets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpcore
import httpx

__all__ = ["bracketed"]


def bracketed(request: httpx.Request) -> httpx.Request:
    """*request*, to be sent through a proxy or not, with the correction when its host is an
    IPv6 literal (a trace of the caller's own still runs after it)."""
    host = request.url.raw_host
    if b":" in host:
        request.extensions = {**request.extensions, "trace": _tracer(request, host)}
    return request


def _tracer(
    request: httpx.Request, host: bytes
) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    connect, tunnel = b"%b:%d" % (host, port), b"[%b]:%d" % (host, port)
    scheme = request.url.raw_scheme + b"://"
    own = request.extensions.get("trace")

    async def trace(event: str, info: dict[str, Any]) -> None:
        sent = info.get("request")
        if event == "http11.send_request_headers.started" and isinstance(sent, httpcore.Request):
            target = sent.url.target
            if sent.method == b"CONNECT" and target == connect:
                target = tunnel
                sent.headers = [(k, tunnel if k.lower() == b"host" else v) for k, v in sent.headers]
            elif target.startswith(scheme + host):
                target = b"%b[%b]%b" % (scheme, host, target[len(scheme + host) :])
            if target != sent.url.target:
                url = sent.url
                sent.url = httpcore.URL(
                    scheme=url.scheme, host=url.host, port=url.port, target=target
                )
        if own is not None:
            await own(event, info)

    return trace
