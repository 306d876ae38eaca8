"""Where and how the gRPC server listens: the advertised address, TLS files, reflection."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import grpc

    from apcore_a2a.settings import Settings

__all__ = ["GRPC_EXTRA_HINT", "bind_host", "enable_reflection", "grpc_address", "read_tls"]

GRPC_EXTRA_HINT = 'gRPC support needs the "grpc" extra: pip install "apcore-a2a[grpc]"'


def bind_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def grpc_address(settings: Settings) -> str:
    """The ``host:port`` advertised on the card for the gRPC interfaces.

    The host is the public URL's (so an agent behind a proxy advertises its public name);
    gRPC addresses carry no scheme.
    """
    host = urlsplit(settings.public_url()).hostname or "127.0.0.1"
    return f"{bind_host(host)}:{settings.grpc_port}"


def read_tls(cert: str | None, key: str | None) -> tuple[bytes, bytes] | None:
    if not cert and not key:
        return None
    if not cert or not key:
        raise ValueError("grpc_tls_cert and grpc_tls_key must be given together")
    try:
        return Path(key).read_bytes(), Path(cert).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read gRPC TLS file {exc.filename}: {exc.strerror}") from None


def enable_reflection(server: grpc.aio.Server, services: Iterable[str]) -> None:
    try:
        from grpc_reflection.v1alpha import reflection
    except ImportError as exc:  # pragma: no cover - grpcio-reflection ships with the extra
        raise ImportError(GRPC_EXTRA_HINT) from exc
    reflection.enable_server_reflection((*services, reflection.SERVICE_NAME), server)
