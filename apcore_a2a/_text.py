"""A text of several lines as one line for a person: the one rule the server's messages and
the client's errors share (a leaf: it imports nothing, so every room may import it)."""

from __future__ import annotations

import re


def message_line(text: str) -> str:
    """*text* (pydantic's, YAML's and a database's messages run to several lines) as one
    line for a person to read: its lines joined by a space, each stripped. Spaces inside a
    line stay as they are: a refusal quoting ``'no  such'`` must not say ``'no such'``.
    (``adapters.errors.one_line`` is for a log argument: it escapes the line breaks
    instead.)"""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


#: The most characters of a caller's value an answer or a log line quotes back.
ECHO_LIMIT = 64
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: No control characters, but a log viewer may start a new line at them (U+2028, U+2029)
#: or show what follows reversed (bidi embeddings, overrides, isolates): a caller could
#: forge what an operator reads.
_INVISIBLE = re.compile("[\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_invisible(text: str) -> str:
    """*text* with its line separators and bidi controls escaped (``\\u2028``)."""
    return _INVISIBLE.sub(lambda found: f"\\u{ord(found[0]):04x}", text)


def escape_controls(text: str, controls: re.Pattern[str] = _CONTROL) -> str:
    """*text* with the characters *controls* finds (every C0 and C1 control, DEL) written
    as ``\\x00``: a caller's value quoted back as it was sent, and still readable."""
    return controls.sub(lambda found: f"\\x{ord(found[0]):02x}", text)


def echoed(value: object, *, quote: bool = False, limit: int = ECHO_LIMIT) -> str:
    """A caller's *value* as an answer or a log line quotes it back: at most *limit*
    characters of it (``repr``'d with *quote*), then ``… (N characters)`` when it was
    longer, so a 1 MB bad value never makes a 1 MB answer, log line or span. Unquoted,
    :func:`escape_controls` and :func:`escape_invisible` apply (quoted, ``repr`` escapes
    both)."""
    text = value if isinstance(value, str) else str(value)
    shown = repr(text[:limit]) if quote else escape_invisible(escape_controls(text[:limit]))
    return shown if len(text) <= limit else f"{shown}… ({len(text)} characters)"
