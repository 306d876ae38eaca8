"""gRPC calls are checked for the A2A version they announce (spec §3.6.2, GRPC-ERR-002).

a2a-sdk 1.3's gRPC servicers never look at the ``a2a-version`` call metadata, so a call
announcing a version the called service does not speak would be served. The interceptor
of ``server/grpc.py`` asks :func:`grpc_version_error` and aborts with the
``VersionNotSupportedError`` it gives (the service name says which protocol a call
reached, so a call without the metadata is served). ``tests/upstream/test_grpc_version.py``
fails when the SDK starts checking by itself; then this file can go.
"""

from __future__ import annotations

from a2a.utils.errors import A2AError, VersionNotSupportedError

__all__ = ["grpc_version_error"]


def grpc_version_error(service_major: str, announced: str | None) -> A2AError | None:
    """The error for a gRPC call announcing *announced* to a service of *service_major*.

    ``None`` when the call may proceed: no version announced (the service name states the
    protocol), or one with the service's major version (minor versions are compatible).
    """
    value = (announced or "").strip()
    if not value or value.split(".", 1)[0] == service_major:
        return None
    shown = value[:20]
    return VersionNotSupportedError(
        message=f"A2A version {shown!r} is not supported by this service "
        f"(it speaks {service_major}.x)"
    )
