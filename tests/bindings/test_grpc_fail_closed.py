"""The gRPC interceptor fails closed: an A2A method it cannot admit is refused.

It admits unary requests only (auth, version, shape and stream slots read the one request).
No A2A method streams its requests today; one that did would have been served untouched,
without authentication. Here the interceptor is put in front of such methods under the 1.0
A2A service's name and a caller without credentials gets ``UNIMPLEMENTED``; the method
never runs.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

from apcore_a2a.auth.authenticator import APIKeyAuthenticator, Gate
from apcore_a2a.server.grpc import SERVICE_V1, _A2AInterceptor
from apcore_a2a.server.limits import StreamLimiter
from apcore_a2a.shape import Shape

from .._support import free_port


async def _abort(error: Any, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.INTERNAL, str(error))


async def _refused(call: Any) -> grpc.StatusCode:
    """The status the server refused *call* with. A request message the client sends after
    the refusal fails in the client itself (INTERNAL, "Failed execute_batch") on a loaded
    machine, hiding the server's status: that call is made again."""
    for _ in range(10):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call()
        code: grpc.StatusCode = refused.value.code()
        if code != grpc.StatusCode.INTERNAL or "execute_batch" not in str(refused.value):
            return code
    return code


async def test_a_client_streaming_a2a_method_is_refused_not_served_unchecked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def upload(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        ran.append("upload")
        return b"served"

    async def chat(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> Any:
        ran.append("chat")
        yield b"served"

    gate = Gate(APIKeyAuthenticator({"k" * 32: "someone"}), require_auth=True)
    interceptor = _A2AInterceptor({SERVICE_V1: _abort}, gate, StreamLimiter(10, 10), None, Shape())
    server = grpc.aio.server(interceptors=[interceptor])
    methods = {
        "Upload": grpc.stream_unary_rpc_method_handler(upload),
        "Chat": grpc.stream_stream_rpc_method_handler(chat),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_V1, methods),))
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            upload_call = channel.stream_unary(f"/{SERVICE_V1}/Upload")
            chat_call = channel.stream_stream(f"/{SERVICE_V1}/Chat")

            async def upload() -> None:
                await upload_call(iter([b"a", b"b"]), timeout=30)

            async def chat() -> None:
                async for _item in chat_call(iter([b"a"]), timeout=30):
                    pass

            for _ in range(2):
                assert await _refused(upload) == grpc.StatusCode.UNIMPLEMENTED
                assert await _refused(chat) == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await server.stop(None)
    assert ran == []
    # Logged once per method, not once per call.
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(logged) == 2, logged
    assert any("/Upload" in m for m in logged) and any("/Chat" in m for m in logged)
