"""Shape limits of a request body (JSON, or gRPC's protobuf), checked before the SDK reads it.

A body within the size cap can still be costly: every JSON value becomes a Python object,
then a protobuf message (about a microsecond each, on the event loop), and protobuf's
parser searches every character of a string field for unpaired surrogates (about 40 ns
each, in one call nothing interrupts). :func:`scan` bounds nesting depth, values in the
body, parts in one message and the bytes of its strings without building anything,
yielding every few thousand tokens so other requests run between steps. The parser that
runs after it checks the syntax. :func:`check_message` bounds a gRPC request the same
way. ``docs/reliability.md`` has the cost of each limit.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.utils.errors import InvalidParamsError
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

# Characters that open or close something; the commas between two of them are counted in
# one go, and scalars and white space are skipped.
_TOKEN = re.compile(rb'[][{}"]')
# The rest of a string's characters up to (not including) its closing quote.
_STRING = re.compile(rb'(?:[^"\\]++|\\.)*+', re.S)
# A message's parts ("content" in 0.3's REST JSON) just before an array; a file's bytes
# (1.0 "raw", 0.3 "bytes") before a string.
_PARTS_KEY = re.compile(rb'"(?:parts|content)"\s*:\s*\Z')
_BYTES_KEY = re.compile(rb'"(?:raw|bytes)"\s*:\s*\Z')
_MESSAGE_DEPTH = 3  # {"params": {"message": {"parts": [: three objects open
_WINDOW = 1 << 16
_STEP = 512


@dataclass(frozen=True, slots=True)
class Shape:
    """The limits (settings ``max_json_depth``, ``max_json_values``,
    ``max_parts_per_message``, ``max_string_bytes``)."""

    max_depth: int = 32
    max_values: int = 2_000
    max_parts: int = 100
    max_string_bytes: int = 128 * 1024

    @classmethod
    def of(cls, settings: Any) -> Shape:
        """The limits a :class:`~apcore_a2a.settings.Settings` sets."""
        s = settings
        return cls(s.max_json_depth, s.max_json_values, s.max_parts_per_message, s.max_string_bytes)


class ShapeError(ValueError):
    """A body beyond a shape limit; ``setting`` names the limit (``None``: a value JSON
    cannot hold, such as a NaN number in a gRPC request)."""

    def __init__(self, message: str, setting: str | None) -> None:
        super().__init__(message if setting is None else f"{message} (limit: {setting})")
        self.setting = setting

    def refusal(self) -> InvalidParamsError:
        """The A2A error every binding answers it with (-32602 / 400 / INVALID_ARGUMENT)."""
        return InvalidParamsError(message=f"Invalid params: {self}")


def scan(body: bytes, shape: Shape) -> Generator[None, None, None]:
    """Check *body* against *shape*, yielding between steps; raises :class:`ShapeError`.
    Values count as containers opened plus separators: a close upper bound, exact about
    everything costly."""
    if _surely_within(body, shape):
        return
    values, strings = 0, 0
    # per open container: is it a "parts" array, and its elements so far
    stack: list[list[Any]] = []
    pos, tokens = 0, 0
    while True:
        found = _TOKEN.search(body, pos)
        stop = len(body) if found is None else found.start()
        commas = body.count(b",", pos, stop)
        if commas:
            values += commas
            if stack and stack[-1][0]:
                stack[-1][1] += commas
                if stack[-1][1] > shape.max_parts:
                    raise _beyond(shape, "max_parts_per_message")
            if values > shape.max_values:
                raise _beyond(shape, "max_json_values")
        if found is None:
            return
        char, pos = body[stop], stop + 1
        tokens += 1
        if tokens % _STEP == 0:
            yield
        if char == 0x22:  # '"': skip the string
            start, close = pos, body.find(b'"', pos)
            if close > 0 and body[close - 1] != 0x5C:
                pos = close + 1  # no escape before the quote: the common case, memchr speed
            else:
                pos = (yield from _escaped_string(body, pos)) + 1
            size = pos - 1 - start
            # A file's bytes are decoded, not searched: the size cap bounds them.
            if size > 1024 and _BYTES_KEY.search(body, max(0, stop - 64), stop):
                size = 0
            strings += size
            if strings > shape.max_string_bytes:
                raise _beyond(shape, "max_string_bytes")
        elif char in b"[{":
            values += 1
            # A message is the body's (REST) or its params' (JSON-RPC): deeper arrays of that
            # name are data, bounded by the value count.
            parts = (
                char == 0x5B
                and len(stack) <= _MESSAGE_DEPTH
                and _PARTS_KEY.search(body, max(0, stop - 64), stop) is not None
            )
            stack.append([parts, 1])
            if len(stack) > shape.max_depth:
                raise _beyond(shape, "max_json_depth")
        elif stack:
            stack.pop()


def _surely_within(body: bytes, shape: Shape) -> bool:
    """Whether *body* is within every limit by counts alone (a few ``bytes.count`` calls,
    no token loop): the walk's counters only ever count, outside strings, what is counted
    here everywhere. Its string bytes are at most the body's; its values are the ``[``
    and ``{`` it opens plus the commas; depth at most the ``[`` and ``{``; a parts array's
    elements at most one more than the commas. Most requests are small and take this path."""
    if len(body) > shape.max_string_bytes:
        return False
    opened = body.count(b"[") + body.count(b"{")
    commas = body.count(b",")
    return (
        opened + commas <= shape.max_values
        and opened <= shape.max_depth
        and commas + 1 <= shape.max_parts
    )


def _escaped_string(body: bytes, pos: int) -> Generator[None, None, int]:
    """Where the string from *pos* ends (its closing quote), in windows."""
    end = len(body)
    while True:
        string = _STRING.match(body, pos, min(pos + _WINDOW, end))
        assert string is not None  # the pattern matches the empty string
        pos = string.end()
        if pos >= end or body[pos] == 0x22 or pos == string.start():
            return pos  # closed, or cut short (the parser reports that)
        yield  # a long string: the next window


def check_message(message: Message, shape: Shape) -> None:
    """:func:`scan`'s limits on a protobuf request (gRPC). A message, ``Struct`` or
    ``ListValue`` is one value and one level (a JSON object or array), a ``Value`` only its
    content; strings (map keys included) count their UTF-8 bytes, a file's ``bytes`` do
    not (as in JSON); a NaN or infinite number, which JSON cannot hold, is refused too. Stops
    at the first limit, so it walks at most ``max_values`` values;
    raises :class:`ShapeError`."""
    left, strings = shape.max_values, 0

    def walk(message: Message, depth: int) -> None:
        nonlocal left, strings
        if message.DESCRIPTOR.full_name != "google.protobuf.Value":
            left, depth = left - 1, depth + 1
            if depth > shape.max_depth:
                raise _beyond(shape, "max_json_depth")
        for field, value in message.ListFields():
            many, target, is_map = field_items(field)
            of_messages = target is not None
            items = value.values() if is_map else value if many else (value,)
            if many and field.name in ("parts", "content") and len(items) > shape.max_parts:
                raise _beyond(shape, "max_parts_per_message")
            texts = value.keys() if is_map else () if of_messages else items
            if is_map or field.type == FieldDescriptor.TYPE_STRING:
                strings += sum(len(text.encode("utf-8")) for text in texts if isinstance(text, str))
                if strings > shape.max_string_bytes:
                    raise _beyond(shape, "max_string_bytes")
            if not of_messages:
                left -= len(items)
                if field.cpp_type == FieldDescriptor.CPPTYPE_DOUBLE and not all(
                    math.isfinite(item) for item in items
                ):
                    # JSON has no NaN or Infinity: such a task could not be read over HTTP.
                    raise ShapeError("a number is NaN or infinite, which JSON cannot hold", None)
            for item in items if of_messages else ():
                walk(item, depth)
            if left < 0:
                raise _beyond(shape, "max_json_values")

    walk(message, 0)


@functools.cache
def field_items(field: FieldDescriptor) -> tuple[bool, Descriptor | None, bool]:
    """What *field* holds: ``(several items, their message type or None, is a map)``; a
    map's items are its values."""
    target = field.message_type
    if target is not None and target.GetOptions().map_entry:
        return True, target.fields_by_name["value"].message_type, True
    # protobuf 6.31 added is_repeated and 7 removed label; a2a-sdk admits 5.29.5.
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:
        repeated = getattr(field, "label", None) == FieldDescriptor.LABEL_REPEATED
    return bool(repeated), target, False


def json_leaves(
    doc: Any,
    descriptor: Descriptor,
    fields_of: Callable[[Descriptor], Mapping[str, FieldDescriptor]],
    prefix: str = "",
) -> Iterator[tuple[str, str, FieldDescriptor, Any]]:
    """``(field path, key sent, field, item)`` of each value of the JSON object *doc* (read
    as *descriptor*) in a field *fields_of* selects (by every key protobuf's parser takes
    for it), walking the messages below it; a map's items are its values, and a
    ``google.protobuf`` type (a ``Struct``) is a leaf."""
    fields = fields_of(descriptor) if isinstance(doc, dict) else {}
    for key, value in doc.items() if fields else ():
        field = fields.get(key)
        if field is None:
            continue
        many, target, is_map = field_items(field)
        items: Any
        if is_map:
            items = value.values() if isinstance(value, dict) else ()
        else:
            items = value if many and isinstance(value, list) else (value,)
        name = prefix + field.name
        if target is None or target.full_name.startswith("google.protobuf."):
            for item in items:
                yield name, key, field, item
        else:
            for item in items:
                yield from json_leaves(item, target, fields_of, name + ".")


_LIMITS = {
    "max_parts_per_message": "more than {0.max_parts} parts in a message",
    "max_json_values": "more than {0.max_values} JSON values",
    "max_string_bytes": "more than {0.max_string_bytes} bytes of strings",
    "max_json_depth": "JSON nested deeper than {0.max_depth}",
}


def _beyond(shape: Shape, setting: str) -> ShapeError:
    return ShapeError(_LIMITS[setting].format(shape), setting)
