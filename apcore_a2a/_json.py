"""How the JSON bindings read a request body: as UTF-8 only, an object naming a key twice
refused, a number A2A cannot carry refused, and what they cannot read refused in our
words on every binding (a leaf: it imports only the leaf ``_text``, so every room may
import it)."""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn

from a2a.utils.errors import JSONParseError

from apcore_a2a._text import echoed


class DuplicateKeyError(ValueError):
    """A JSON object names *key* twice. RFC 8259 §4 leaves it to each parser: protobuf's
    (the REST binding's) refuses it, Python's keeps the last value, so JSON-RPC refuses it
    too rather than run what a reader of the first value would not expect."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {echoed(key, quote=True)}")
        self.key = key


class NumberError(ValueError):
    """A JSON number A2A cannot carry: its numbers are protobuf doubles (a data part's
    ``Value``) or int32s, and RFC 8259 §6 lets a parser bound their range. Python's parser
    reads ``NaN``, ``Infinity`` and ``1e999`` (as infinity), which protobuf's ``Value``
    then stores but no JSON answer can hold (the owner's ``ListTasks`` failed on the task),
    and refuses an integer of more than 4300 digits in words about ``sys``."""


_NON_FINITE = "NaN and Infinity are not JSON numbers (RFC 8259)"
_OUT_OF_RANGE = "a number is beyond a double's range (RFC 8259 §6)"


def parse_refusal(exc: Exception) -> JSONParseError:
    """The refusal of a body the JSON bindings' parser (:func:`load_json`) refused with
    *exc*, in our words whatever the binding (REST answers it 400 as the SDK does)."""
    if isinstance(exc, RecursionError):
        return JSONParseError(message="Parse error: JSON nested too deeply")
    if isinstance(exc, UnicodeDecodeError):
        return JSONParseError(message="Parse error: body is not valid UTF-8 JSON")
    if isinstance(exc, DuplicateKeyError | NumberError):
        return JSONParseError(message=f"Parse error: {exc}")
    return JSONParseError(message="Parse error: body is not valid JSON")


def load_json(text: str | bytes) -> Any:
    """*text* parsed as the JSON bindings read it: an object naming a key twice is
    :class:`DuplicateKeyError` (protobuf's parser refuses it; Python's keeps the last), a
    number that is no finite double (``NaN``, ``Infinity``, ``1e999``, 10**400)
    :class:`NumberError`."""
    return json.loads(
        text,
        object_pairs_hook=unique_keys,
        parse_int=_integer,
        parse_float=_finite,
        parse_constant=_non_finite,
    )


def _integer(text: str) -> int:
    # The scanner hands over JSON's digits only. Fewer than 309 of them always fit a double
    # and int() (which takes at least 640); the rest are told apart by their value.
    if len(text) > 308 and math.isinf(float(text)):
        raise NumberError(_OUT_OF_RANGE)
    return int(text)


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise NumberError(_OUT_OF_RANGE)
    return number


def _non_finite(_word: str) -> NoReturn:
    raise NumberError(_NON_FINITE)


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The ``object_pairs_hook`` that refuses an object naming a key twice
    (:class:`DuplicateKeyError`); the client reads agents' answers with it too."""
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
