"""The egress proxy of a gRPC call: the one the HTTP calls would take to that host, by
httpx's rule (``_proxies.proxy_for``), handed to grpcio as a channel option.

grpcio reads the environment by a rule of its own: ``grpc_proxy``, ``https_proxy`` and
``http_proxy`` in lower case only, ``https_proxy`` for a plaintext channel too,
``no_grpc_proxy``/``no_proxy`` but not ``NO_PROXY``, no ``ALL_PROXY``. So an agent that
``NO_PROXY`` exempted went direct over HTTP and through the proxy over gRPC, and one that
``HTTPS_PROXY`` named went through it over HTTP and direct over gRPC. A proxy grpcio
cannot use (it speaks HTTP ``CONNECT`` to ``http://`` proxies only) was skipped without a
word: the call went direct past it. It is refused here instead.
"""

from __future__ import annotations

from typing import Any

import httpx

from apcore_a2a._proxies import ProxyUnusable, proxy_for


def grpc_proxy_options(authority: str, secure: bool) -> list[tuple[str, Any]]:
    """grpcio's channel options for a call to the gRPC agent at *authority*
    (``host:port``, over TLS when *secure*): through the proxy httpx's rule names for
    ``https://`` (``http://``) *authority*, or none, grpcio's own reading of the
    environment off. :class:`ProxyUnusable` for a proxy that is not ``http://``."""
    url = httpx.URL(("https://" if secure else "http://") + authority)
    proxy = proxy_for(url)
    if proxy is None:
        return [("grpc.enable_http_proxy", 0)]
    if httpx.URL(proxy).scheme != "http":
        raise ProxyUnusable(proxy, "gRPC calls go through http:// proxies only (HTTP CONNECT)")
    return [("grpc.http_proxy", proxy)]
