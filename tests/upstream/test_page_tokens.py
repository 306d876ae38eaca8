"""Watch: a2a-sdk's page-token decoder raises ``RecursionError`` on deeply nested JSON and
returns a cursor whose time no protobuf ``Timestamp`` holds.

``apcore_a2a.upstream.page_tokens.page_cursor`` refuses both as invalid params before any
store reads the token. The first two tests fail the day the SDK's
``decode_list_tasks_cursor`` stops doing either (catches ``RecursionError``, checks the
time): then ``page_cursor`` can become the SDK's call. The others hold the correction;
``tests/storage/test_own_store_page_tokens.py`` shows it through a real server.
"""

from __future__ import annotations

import base64
import json

import pytest
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor

from apcore_a2a.upstream.page_tokens import TOKEN_DEPTH, page_cursor


def _token(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


NESTED = _token(b"[" * 100_000 + b"]" * 100_000)
FAR_FUTURE = _token(json.dumps({"ts": 10**30, "id": "x"}).encode())


def test_the_sdk_decoder_still_runs_out_of_stack_on_nested_json() -> None:
    with pytest.raises(RecursionError):
        decode_list_tasks_cursor(NESTED)


def test_the_sdk_decoder_still_takes_any_time() -> None:
    assert decode_list_tasks_cursor(FAR_FUTURE) == ListTasksCursor(10**30, "x")


def test_page_cursor_refuses_what_no_store_can_read() -> None:
    unreadable = [NESTED, FAR_FUTURE, _token(b"[" * (TOKEN_DEPTH + 1))]
    unreadable.append(_token(json.dumps({"ts": -(10**30), "id": "x"}).encode()))
    for token in unreadable:
        with pytest.raises(InvalidParamsError):
            page_cursor(token)


def test_page_cursor_reads_what_the_sdk_writes() -> None:
    for cursor in (ListTasksCursor(1_700_000_000 * 10**9, "t-1"), ListTasksCursor(None, "t")):
        assert page_cursor(encode_list_tasks_cursor(cursor)) == cursor
    # brackets inside the id are text: 5000 of them are no nesting
    brackets = ListTasksCursor(1, "[{" * 5000)
    assert page_cursor(encode_list_tasks_cursor(brackets)) == brackets
    # the older form (base64 of a task id) and text that is no token: left to the store
    assert page_cursor(base64.b64encode(b"task-1").decode()) is None
    assert page_cursor("%%%not-a-token%%%") is None
    assert page_cursor(_token(b"[" * TOKEN_DEPTH + b"]" * TOKEN_DEPTH)) is None
