"""gRPC calls are checked for the A2A version they announce (spec §3.6.2, GRPC-ERR-002).

a2a-sdk 1.3's gRPC servicers never read the ``a2a-version`` metadata, so a call announcing
a version the service does not speak would be served; the interceptor of
``server/grpc.py`` aborts it with :func:`grpc_version_error`'s error.
``tests/upstream/test_grpc_version.py`` fails when the SDK starts checking by itself.
"""

from __future__ import annotations

from a2a.utils.errors import A2AError, VersionNotSupportedError


def grpc_version_error(service_major: str, announced: str | None) -> A2AError | None:
    """The error for a call announcing *announced* to a service of *service_major*; ``None``
    for none announced (the service states the protocol) or the same major version."""

    value = (announced or "").strip()
    if not value or value.split(".", 1)[0] == service_major:
        return None
    shown = value[:20]
    return VersionNotSupportedError(
        message=f"A2A version {shown!r} is not supported by this service "
        f"(it speaks {service_major}.x)"
    )
