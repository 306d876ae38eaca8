"""Raw gRPC helpers: stubs for both A2A services and the rich status of a failed call."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.types import a2a_pb2_grpc
from a2a.utils.grpc_status import status_from_call
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc


def _announced(details: Any) -> Any:
    """*details* with ``a2a-version`` (1.0 or 0.3, by the service called) unless it names
    one, as the SDK's clients send it: a call without it is 0.3 (spec §3.6.2)."""
    method = details.method.decode() if isinstance(details.method, bytes) else details.method
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    if "a2a-version" not in metadata:
        metadata.add("a2a-version", "0.3" if method.startswith("/a2a.v1.") else "1.0")
    return details._replace(metadata=metadata)


# grpc.aio files an interceptor under the first kind it is, so one class per kind.
class _AnnounceUnary(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_announced(details), request)


class _AnnounceStream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_announced(details), request)


@contextlib.asynccontextmanager
async def stubs(
    address: str, credentials: grpc.ChannelCredentials | None = None, *, announce: bool = True
) -> AsyncIterator[tuple[Any, Any]]:
    """``(1.0 stub, 0.3 stub)`` on one channel to *address*; each call announces its
    service's version unless it names one or *announce* is off."""
    interceptors = [_AnnounceUnary(), _AnnounceStream()] if announce else None
    channel = (
        grpc.aio.secure_channel(address, credentials, interceptors=interceptors)
        if credentials is not None
        else grpc.aio.insecure_channel(address, interceptors=interceptors)
    )
    try:
        yield a2a_pb2_grpc.A2AServiceStub(channel), a2a_v0_3_pb2_grpc.A2AServiceStub(channel)
    finally:
        await channel.close()


def rich_status(error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """Code, message and the ``google.rpc`` details (ErrorInfo, BadRequest) of a failure."""
    out: dict[str, Any] = {"code": error.code(), "message": error.details()}
    status = status_from_call(error)
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(info):
            out["reason"], out["domain"] = info.reason, info.domain
        elif detail.Unpack(bad):
            out["violations"] = [v.field for v in bad.field_violations]
    return out


async def list_services(address: str) -> list[str]:
    """Service names the server reports through reflection."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        )
        async for response in responses:
            return sorted(s.name for s in response.list_services_response.service)
    raise AssertionError("no reflection response")


async def failure(call: Any) -> grpc.aio.AioRpcError:
    """Await a gRPC call that must fail, and return its error."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc
    raise AssertionError("the call succeeded")


def self_signed_cert(directory: Path, *names: str) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1, ::1, localhost and *names*:
    ``(cert.pem, key.pem)``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                    *map(x509.DNSName, names),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
