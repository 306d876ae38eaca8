"""a2a-sdk's client imported whole before any of its server's modules that import it
half-way, so that an a2a-sdk ``ClientFactory`` in the same process keeps its 0.3 gRPC
transport.

In a2a-sdk 1.3, ``a2a.server.routes`` (and ``a2a.compat.v0_3``'s ``context_builders``,
``grpc_handler``, ``grpc_transport``, ``jsonrpc_adapter``, ``rest_handler``), imported
before ``a2a.client``, reach ``a2a.compat.v0_3.extension_headers``, which imports
``a2a.client``; its ``client_factory`` then imports ``a2a.compat.v0_3.grpc_transport``,
which needs the half-imported ``extension_headers``: the ``ImportError`` is swallowed
(``CompatGrpcTransport = None``) and stays for the life of the process. Every
``ClientFactory`` built afterwards, ours or an application's, sends the calls for a
0.3 gRPC interface to the 1.0 service (``lf.a2a.v1.A2AService``): a 0.3-only agent
answers ``UNIMPLEMENTED``, ours serves them as 1.0 (push deliveries in 1.0's shape).

Importing ``a2a.client`` first is what any process that uses the SDK's client first gets:
it changes nothing else. Every module of ours that imports one of those SDK modules
imports this one first (``tests/upstream/test_client_first.py`` checks it).
"""

from __future__ import annotations

import a2a.client  # noqa: F401
