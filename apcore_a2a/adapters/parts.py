"""A2A Parts <-> apcore module input and output (pure), by the tables of the README ("How
messages reach modules") and docs/lifecycle.md ("What a module answers"). Numbers arrive as
protobuf doubles (``2`` travels as ``2.0``), so integral values become ``int`` wherever the
schema says ``integer``: apcore validates strictly and would reject them otherwise.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import filetype  # type: ignore[import-untyped]
from a2a.types import Part
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.struct_pb2 import Struct, Value

from apcore_a2a._text import echoed
from apcore_a2a.adapters.outputs import File, file_from_value, text_from_value
from apcore_a2a.adapters.schema import SchemaFacts, coerce_integers, json_types

_OCTET = "application/octet-stream"
_DOUBLE_MAX = sys.float_info.max

#: How deep a module's output may nest, in protobuf messages under a data part's ``Value``:
#: protobuf (upb) parses at most 100 nested messages, and the deepest envelope a part
#: travels in (a streamed status update's message, 0.3's ``DataPart``) takes up to 8 of them.
#: An object costs three (``Struct``, its entry, ``Value``), a list two: 30 nested objects,
#: 45 nested lists. A deeper part could not even be copied into an artifact.
_MAX_VALUE_DEPTH = 92
MAX_OUTPUT_OBJECTS, MAX_OUTPUT_LISTS = (_MAX_VALUE_DEPTH - 1) // 3, (_MAX_VALUE_DEPTH - 1) // 2


class OutputTooDeep(Exception):
    """A module's output nested deeper than A2A's wire (protobuf) carries: the module's
    failure, mapped as a custom apcore error (``code`` and ``details``), so its task ends
    ``failed`` with this message."""

    code = "OUTPUT_TOO_DEEP"
    details: dict[str, Any] = {}
    message = (
        f"Module output is nested too deeply for A2A: at most {MAX_OUTPUT_OBJECTS} nested "
        f"objects or {MAX_OUTPUT_LISTS} nested lists"
    )

    def __init__(self) -> None:
        super().__init__(self.message)


def too_deep(value: Any) -> bool:
    """Whether *value*, as a data part, nests deeper than protobuf carries (see
    :class:`OutputTooDeep`). Iterative: a value nested deeper than Python recurses, or
    holding itself, ends here too."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > _MAX_VALUE_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 3) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 2) for v in item)
    return False


def value_to_python(value: Value) -> Any:
    """Convert a protobuf ``Value`` to plain Python (numbers stay floats)."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {k: value_to_python(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [value_to_python(v) for v in value.list_value.values]
    return None if kind in (None, "null_value") else getattr(value, kind)


def _file_value(part: Part, prop_schema: Any) -> Any:
    is_raw = part.HasField("raw")
    source = base64.b64encode(part.raw).decode("ascii") if is_raw else part.url
    # A property that is (or may be, as in ``bytes | None``) a string takes the bare source.
    if isinstance(prop_schema, Mapping) and "string" in json_types(prop_schema):
        return source
    return {
        "bytes" if is_raw else "uri": source,
        "name": part.filename or "file",
        "mimeType": part.media_type or (sniff_media_type(part.raw) if part.raw else _OCTET),
    }


def _bad(message: str, **data: Any) -> InvalidParamsError:
    return InvalidParamsError(message=message, data=data or None)


def input_from_parts(parts: Sequence[Part], facts: SchemaFacts) -> dict[str, Any]:
    """Build the module input dict from message *parts* for a module with *facts*.

    Raises ``InvalidParamsError`` (-32602) with a message a caller can act on.
    """
    expected = facts.summary
    if not parts:
        raise _bad(
            f"Message has no parts; expected a data part matching {expected}", expected=expected
        )
    merged: dict[str, Any] | None = None
    texts: list[str] = []
    files: list[Part] = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind in ("raw", "url"):
            files.append(part)
        elif kind == "data":
            value = value_to_python(part.data)
            if not isinstance(value, dict):
                raise _bad(
                    f"A data part must hold a JSON object matching {expected}", expected=expected
                )
            if merged is None:
                merged = value
                continue
            for key, item in value.items():
                if key in merged and merged[key] != item:
                    raise _bad(
                        f"Data parts disagree on key '{key[:100]}'", conflictingKey=key[:100]
                    )
                merged[key] = item
    result = merged if merged is not None else _input_from_text(texts, facts)
    if files:
        _place_files(result, files, facts)
    coerced: dict[str, Any] = coerce_integers(result, facts)
    return coerced


def _input_from_text(texts: list[str], facts: SchemaFacts) -> dict[str, Any]:
    if not texts:
        return {}  # only files: they fill binary properties of an otherwise empty input
    text = "\n".join(texts)
    hint = "expected a data part or JSON object matching"
    if text.strip().startswith("{"):
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):  # nested deeper than Python decodes, too
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        hint = f"Text part is not a valid JSON object; {hint}"
    if facts.text_property is not None:
        return {facts.text_property: text}
    raise _bad(f"{hint} {facts.summary}", expected=facts.summary)


def _place_files(result: dict[str, Any], files: list[Part], facts: SchemaFacts) -> None:
    if not facts.binary:
        # A2A: a part of a media type the agent does not accept is ContentTypeNotSupported.
        # The media types are echoed back to the caller: short, without control characters.
        media = sorted({echoed(p.media_type) or _OCTET for p in files})
        raise ContentTypeNotSupportedError(
            message=f"This skill takes no file input (got {', '.join(media)})",
            data={"mediaTypes": media, "expected": facts.summary},
        )
    free = [name for name in facts.binary if name not in result]
    props = facts.schema.get("properties") or {}
    for part in files:
        field = part.metadata.fields.get("field") if part.HasField("metadata") else None
        wanted = field.string_value if field is not None else None
        if wanted not in facts.binary:
            if not free:
                raise _bad(
                    f"Too many file parts; this skill takes {len(facts.binary)}",
                    fileFields=list(facts.binary),
                )
            wanted = free[0]
        if wanted in free:
            free.remove(wanted)
        result[wanted] = _file_value(part, props.get(wanted))


def sniff_media_type(data: bytes) -> str:
    """Guess a media type from magic bytes (``application/octet-stream`` if unknown)."""
    guessed = filetype.guess_mime(data[:8192]) if data else None
    return str(guessed) if guessed else _OCTET


def _data_part(value: Any) -> Part:
    if too_deep(value):
        raise OutputTooDeep()
    if _no_double(value):
        value = _json_numbers(value)
    holder = Struct()
    try:
        holder.update({"v": value})
    except (TypeError, ValueError):
        # Values protobuf cannot hold (datetimes, decimals, sets...) go through JSON.
        holder = Struct()
        holder.update({"v": json.loads(json.dumps(value, default=str))})
    part = Part()
    part.data.CopyFrom(holder.fields["v"])
    return part


def _no_double(value: Any) -> bool:
    """Whether *value* holds a number a ``google.protobuf.Value`` (a double) cannot hold."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int):
        return abs(value) > _DOUBLE_MAX
    if isinstance(value, dict):
        return any(_no_double(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_no_double(v) for v in value)
    return False


def _json_numbers(value: Any) -> Any:
    """*value* with each NaN or infinite float as ``None``, as pydantic's JSON mode and
    ``JSON.stringify`` write them: JSON has no such numbers, and a task holding one could
    be read over no JSON binding. An integer beyond a double's range (a data part's
    numbers are doubles) becomes its decimal digits, as proto JSON writes 64-bit integers;
    one too long for Python to print (``sys.set_int_max_str_digits``) becomes ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int) and abs(value) > _DOUBLE_MAX:
        try:
            return str(value)
        except ValueError:
            return None
    if isinstance(value, dict):
        return {k: _json_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_numbers(v) for v in value]
    return value


def _file_part(file: File | bytes, default_name: str | None = None) -> Part:
    if isinstance(file, bytes):
        file = File(raw=file)
    if file.raw is not None:
        part = Part(raw=file.raw, media_type=file.media_type or sniff_media_type(file.raw))
    else:
        part = Part(url=file.url or "", media_type=file.media_type or "")
    part.filename = file.filename or default_name or ""
    return part


def is_file(value: Any) -> bool:
    """Whether *value* becomes a file part (``bytes``, a ``File`` or its dict shape)."""
    return _as_file(value) is not None


def _as_file(value: Any) -> File | bytes | None:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return file_from_value(value)


def output_to_parts(value: Any, *, wrapped_result: bool = False) -> list[Part]:
    """Convert a module's return value to A2A parts (see module docstring).

    Raises :class:`OutputTooDeep` for a value nested deeper than protobuf carries."""
    if wrapped_result and isinstance(value, dict) and len(value) == 1 and "result" in value:
        value = value["result"]
    if value is None:
        return []
    if isinstance(value, str):
        return [Part(text=value)]
    text = text_from_value(value)
    if text is not None:
        return [Part(text=text)]
    file = _as_file(value)
    if file is not None:
        return [_file_part(file)]
    if isinstance(value, dict):
        files = [(str(k), f) for k, v in value.items() if (f := _as_file(v)) is not None]
        if not files:
            return [_data_part(value)]
        named = {key for key, _ in files}
        rest = {k: v for k, v in value.items() if k not in named}
        return ([_data_part(rest)] if rest else []) + [_file_part(f, k) for k, f in files]
    if isinstance(value, list | tuple) and value:
        listed = [_as_file(item) for item in value]
        if all(f is not None for f in listed):
            return [_file_part(f) for f in listed if f is not None]
    return [_data_part(value)]
