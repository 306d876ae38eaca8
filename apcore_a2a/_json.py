"""How the JSON bindings read a request body: as UTF-8 only, an object naming a key twice
refused, and what they cannot read refused in our words on every binding (a leaf: it
imports only the leaf ``_text``, so every room may import it)."""

from __future__ import annotations

import json
import sys
from typing import Any

from a2a.utils.errors import JSONParseError

from apcore_a2a._text import echoed


class DuplicateKeyError(ValueError):
    """A JSON object names *key* twice. RFC 8259 §4 leaves it to each parser: protobuf's
    (the REST binding's) refuses it, Python's keeps the last value, so JSON-RPC refuses it
    too rather than run what a reader of the first value would not expect."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {echoed(key, quote=True)}")
        self.key = key


#: Python converts no integer of more digits (``sys.get_int_max_str_digits``; 0: no limit)
MAX_DIGITS = sys.get_int_max_str_digits() or sys.maxsize


class LongNumberError(ValueError):
    """A JSON number of more than :data:`MAX_DIGITS` digits (Python's words name
    ``sys.set_int_max_str_digits``, no concern of a caller's)."""

    def __init__(self) -> None:
        super().__init__(f"a number has more than {MAX_DIGITS} digits")


def parse_refusal(exc: Exception) -> JSONParseError:
    """The refusal of a body the JSON bindings' parser (:func:`load_json`) refused with
    *exc*, in our words whatever the binding (REST answers it 400 as the SDK does)."""
    if isinstance(exc, RecursionError):
        return JSONParseError(message="Parse error: JSON nested too deeply")
    if isinstance(exc, UnicodeDecodeError):
        return JSONParseError(message="Parse error: body is not valid UTF-8 JSON")
    if isinstance(exc, DuplicateKeyError | LongNumberError):
        return JSONParseError(message=f"Parse error: {exc}")
    return JSONParseError(message="Parse error: body is not valid JSON")


def load_json(text: str | bytes) -> Any:
    """*text* parsed as the JSON bindings read it: an object naming a key twice is
    :class:`DuplicateKeyError` (protobuf's parser refuses it; Python's keeps the last), a
    number Python does not convert :class:`LongNumberError`."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except ValueError as exc:
        # Besides ours, json.loads lets out only int()'s refusal of too many digits as a
        # plain ValueError (its syntax errors are JSONDecodeError).
        if type(exc) is ValueError:
            raise LongNumberError from None
        raise


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) < len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return doc


def utf8_json(body: bytes) -> bool:
    """Whether *body* can be UTF-8 JSON: RFC 8259 §8.1 makes UTF-8 the only encoding, and
    UTF-16 or UTF-32 text (detected as RFC 4627 §3 does: a NUL among the first four bytes;
    or a byte order mark) is told apart before anything counts its values."""
    head = body[:4]
    return 0 not in head and not head.startswith((b"\xfe\xff", b"\xff\xfe"))
