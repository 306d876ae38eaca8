"""A gRPC channel through the egress proxy the client chose, with none of grpcio's own
exemptions.

grpcio 1.85's proxy mapper reads the environment's exemptions even for a proxy given as a
channel option (``grpc.http_proxy``): ``no_grpc_proxy``, else ``no_proxy``, by a rule of
its own (a CIDR range such as ``127.0.0.0/8``, which httpx reads as one host). A call the
client's rule (httpx's, ``_proxies.proxy_for``) sends through the proxy so went direct,
past the operator's proxy, when one of them named its host. No channel option turns that
reading off alone: the channel is made as the mapper makes it, with the mapper off
(``grpc.enable_http_proxy`` 0). It dials the proxy, and grpcio's ``CONNECT`` handshaker asks
the proxy for the agent through the two options the mapper sets (``grpc.http_connect_server``,
and ``grpc.http_connect_headers`` for the proxy's credentials).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote

import httpx

__all__ = ["through_proxy"]


def through_proxy(proxy: str, server: str) -> tuple[str, list[tuple[str, Any]]]:
    """The target and the channel options of a channel to *server* (``host:port``, as the
    ``CONNECT`` request names it) through the ``http://`` *proxy*."""
    url = httpx.URL(proxy)
    host = url.host if ":" not in url.host else f"[{url.host}]"
    options: list[tuple[str, Any]] = [
        ("grpc.enable_http_proxy", 0),
        ("grpc.http_connect_server", server),
    ]
    if url.userinfo:  # as the mapper sends a proxy URL's user and password
        said = base64.b64encode(unquote(url.userinfo.decode("ascii")).encode()).decode()
        options.append(("grpc.http_connect_headers", f"Proxy-Authorization:Basic {said}"))
    return f"dns:///{host}:{url.port or 80}", options
