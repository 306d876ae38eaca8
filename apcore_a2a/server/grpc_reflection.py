"""gRPC server reflection (setting ``grpc_reflection``) of the services the agent serves,
and of nothing else in its process.

grpcio-reflection answers from protobuf's default descriptor pool: every ``.proto`` the
process has loaded (an application's own internal services, an OTLP exporter's) was
described to anyone who named it, listed or not. The pool here holds the served services'
files and their imports only.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc.aio
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import FileDescriptor


def served_pool(services: Iterable[str]) -> descriptor_pool.DescriptorPool:
    """A descriptor pool of the files defining *services* (full names), and their imports."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in added:
            return
        added.add(file.name)
        for imported in file.dependencies:
            add(imported)
        pool.AddSerializedFile(file.serialized_pb)

    for service in services:
        add(descriptor_pool.Default().FindServiceByName(service).file)
    return pool


def enable_reflection(server: grpc.aio.Server, services: tuple[str, ...]) -> None:
    """Serve reflection on *server*, listing and describing *services* and itself."""
    from grpc_reflection.v1alpha import reflection

    names = (*services, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server, pool=served_pool(names))
