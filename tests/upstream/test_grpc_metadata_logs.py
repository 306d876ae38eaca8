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

from tests._h2raw import undecodable_to_plain_server


async def test_grpcio_logs_an_error_for_each_read_of_a_value_that_is_not_utf8(
    caplog: Any,
) -> None:
    seen = await undecodable_to_plain_server(b"\xff")
    assert ("x-note", "\xff") in seen
    records = [r for r in caplog.records if r.getMessage() == "Invalid encoding on b'\\xff'"]
    assert records, "grpcio no longer logs a value it cannot decode"
    assert {(r.levelno, r.exc_info is not None) for r in records} == {(logging.ERROR, True)}
