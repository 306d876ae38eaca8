"""A ``ListTasks`` page token the SDK's stores cannot read is invalid params, whichever
store reads it and wherever on the stack (spec §3.1.4: the token is the caller's, the
opaque cursor of an earlier page; a bad one is the caller's error, not the agent's).

a2a-sdk 1.3's ``decode_list_tasks_cursor`` (``a2a.utils.task``) runs ``json.loads`` on the
caller's token, catching only ``ValueError``: JSON nested deeper than the stack has room
for raises ``RecursionError``, at a depth that depends on the frames above the call (a
guard a few frames above a store passed a token the store's ``list`` then failed on:
-32603 / HTTP 500 / ``INTERNAL``). It returns a cursor whatever integer its time is; the
SDK's ``DatabaseTaskStore.list`` then fails building a ``Timestamp`` of it ("Timestamp is
not valid"), the same -32603. :func:`page_cursor` reads a token as the SDK does and
refuses both first, by what the token holds.
"""

from __future__ import annotations

import binascii
import json
import re
from base64 import urlsafe_b64decode

from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor
from google.protobuf.timestamp_pb2 import Timestamp

BAD_TOKEN = "Invalid page token"  # noqa: S105 - an error message
#: The deepest a page token's JSON may nest (the SDK's cursor is one object, its older
#: form no JSON at all): a bound of the token, not of the stack that reads it.
TOKEN_DEPTH = 32
#: a JSON string (an unterminated one runs to the end), whose brackets are text
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\Z)', re.DOTALL)


def page_cursor(token: str) -> ListTasksCursor | None:
    """The SDK's reading of a page *token* (``None``: not its current form), or
    ``InvalidParamsError`` for a token no store can read (see the module docstring)."""
    if _brackets(token) > TOKEN_DEPTH:
        raise InvalidParamsError(BAD_TOKEN)
    cursor = decode_list_tasks_cursor(token)
    if cursor is not None and cursor.timestamp_ns is not None:
        try:
            Timestamp().FromNanoseconds(cursor.timestamp_ns)
        except ValueError:
            raise InvalidParamsError(BAD_TOKEN) from None
    return cursor


def _brackets(token: str) -> int:
    """The arrays and objects the SDK's decoder may open reading *token* (at least as
    many as it nests): the brackets of its JSON text, read as the decoder reads it, that
    are no string's."""
    try:  # as decode_list_tasks_cursor decodes it
        payload = urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4))
        text = payload.decode(json.detect_encoding(payload), "surrogatepass")
    except (binascii.Error, UnicodeDecodeError):  # no JSON: the older form's, at most
        return 0
    text = _STRING.sub("", text)
    return text.count("[") + text.count("{")
