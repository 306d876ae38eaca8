"""What the client commands write to a terminal: the agent's words without anything that
drives the terminal or hides from the reader (control, format and separator characters)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

#: What changes what a terminal shows without being seen: the format characters (Unicode
#: category Cf: bidi overrides and isolates that reorder a line, as in "Trojan Source";
#: zero-width characters; tags, invisible ASCII look-alikes) and the line and paragraph
#: separators (Zl, Zp: a line break to many readers, though JSON leaves them raw). Listed
#: (Unicode 15) rather than looked up at start-up; tests/client/test_cli.py checks the list
#: against this Python's Unicode database.
_INVISIBLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
#: what a terminal may read as a command (ESC starts one; U+009B is CSI): C0, DEL and C1;
#: and the invisible characters above
_CONTROLS = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
#: what of those JSON leaves raw in its strings (it escapes C0 itself)
_JSON_RAW = re.compile(f"[\x7f-\x9f{_INVISIBLE}]")


def emit(obj: Any, *, indent: int | None = None) -> None:
    """Print *obj* as JSON on stdout (one line unless *indent*), nothing raw in it."""
    # JSON escapes C0 in strings itself; the rest is escaped here (the same value; a
    # character past U+FFFF as its surrogate pair, as JSON spells it).
    text = json.dumps(obj, indent=indent, ensure_ascii=False)
    sys.stdout.write(_JSON_RAW.sub(lambda m: json.dumps(m[0])[1:-1], text) + "\n")
    sys.stdout.flush()


def printable(text: str) -> str:
    """*text* (the agent's words included) for a line on a terminal: one line, every
    control or invisible character as its ``\\xNN``/``\\uNNNN`` escape, so none is sent to
    the terminal raw."""
    return _CONTROLS.sub(lambda m: m[0].encode("unicode_escape").decode(), " ".join(text.split()))
