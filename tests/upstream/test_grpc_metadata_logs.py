"""Watch: grpcio logs an ERROR with a traceback for a call metadata value that is not
UTF-8, each time the call's metadata is read.

A plain ``grpc.aio`` server in the process (none of ours running) reads such a call's
metadata once: grpcio logs "Invalid encoding on b'...'" at ERROR with the exception, and
hands the value over decoded as Latin-1. The day it stops, this test fails and
``apcore_a2a/upstream/grpc_metadata_logs.py`` can go.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
import grpc.aio

from tests._h2raw import END_HEADERS, HEADERS, Peer, frame, grpc_headers, header_block, message


async def test_grpcio_logs_an_error_for_each_read_of_a_value_that_is_not_utf8(
    caplog: Any,
) -> None:
    seen: list[Any] = []

    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.extend(context.invocation_metadata() or ())
        return request

    handler = grpc.method_handlers_generic_handler(
        "plain.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
    )
    server = grpc.aio.server(handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    peer = await Peer.open("127.0.0.1", port)
    try:
        peer.preface()
        head = grpc_headers("127.0.0.1", "/plain.Echo/Echo", version="")
        peer.send(frame(HEADERS, END_HEADERS, 1, head + header_block([("x-note", b"\xff")])))
        peer.finish_call(1, message(b"hi"))
        await peer.until_ended(1, 30)
    finally:
        await peer.close()
        await server.stop(None)
    assert ("x-note", "\xff") in seen
    records = [r for r in caplog.records if r.getMessage() == "Invalid encoding on b'\\xff'"]
    assert records, "grpcio no longer logs a value it cannot decode"
    assert {(r.levelno, r.exc_info is not None) for r in records} == {(logging.ERROR, True)}
