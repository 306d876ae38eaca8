"""Logging: plain text or one JSON object per line, with the task in context
(docs/operations.md).

:func:`configure` installs one stderr handler on the root logger, so uvicorn's and the SDK's
records come out in the same format; records logged inside a task carry the fields
:func:`bind` attached (``task_id``, ``skill_id``, ``trace_id``). Client text can reach a
message, so the formatters escape control characters (``\\x1b``, visibly), cap the length
and escape line breaks: one record is one line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, TextIO

from apcore_a2a.adapters.errors import clean_for_log, escape_line_breaks, one_line

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

#: Longest message (in characters) a record keeps; the rest is cut with a marker.
MAX_MESSAGE = 4000
#: Longest traceback a record keeps, and longest line of it (its last line is the
#: exception's message, which may repeat a client's input of any size).
MAX_TRACEBACK = 16_000
MAX_TRACEBACK_LINE = 1000
_FIELDS = ("task_id", "skill_id", "trace_id")

_context: ContextVar[dict[str, str] | None] = ContextVar("apcore_a2a_log_context", default=None)


def bind(**fields: str | None) -> Token[dict[str, str] | None]:
    """Attach *fields* (``task_id``, ``skill_id``, ``trace_id``; ``None`` left out) to
    records logged from here; returns a token for :func:`unbind`."""
    merged = dict(_context.get() or {})
    merged.update({k: v for k, v in fields.items() if v})
    return _context.set(merged)


def unbind(token: Token[dict[str, str] | None]) -> None:
    """Restore the fields that were bound before the matching :func:`bind`."""
    _context.reset(token)


def current_fields() -> dict[str, str]:
    """The fields bound in the current context (empty outside a task)."""
    return dict(_context.get() or {})


def _message(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception:  # a bad %-format must not lose the record
        text = f"{record.msg!r} {record.args!r}"
    # clean_for_log keeps line breaks and tabs; escaped here, one record stays one line.
    return one_line(text, MAX_MESSAGE)


def _traceback(formatter: logging.Formatter, record: logging.LogRecord) -> str | None:
    """The record's traceback (and stack), cleaned and cut: each line at
    :data:`MAX_TRACEBACK_LINE`, the whole at :data:`MAX_TRACEBACK`."""
    found = [
        formatter.formatException(record.exc_info) if record.exc_info else record.exc_text,
        formatter.formatStack(record.stack_info) if record.stack_info else None,
    ]
    text = "\n".join(part for part in found if part)
    if not text:
        return None
    lines = (clean_for_log(line, MAX_TRACEBACK_LINE) for line in text.splitlines())
    return clean_for_log("\n".join(lines), MAX_TRACEBACK)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts, level, logger, msg``, the bound fields, ``exc``."""

    converter = staticmethod(time.gmtime)  # formatTime: UTC, to the millisecond
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": _message(record),
        }
        out.update(current_fields())
        exc = _traceback(self, record)
        if exc is not None:
            out["exc"] = exc
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``TIME LEVEL logger: message [task_id=... skill_id=... trace_id=...]``, then the
    traceback if any, on the same line: an exception's message may carry client text, which
    must not start a line of its own (a forged record)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        # A copy: other handlers must still see the record as it was logged.
        clean = logging.makeLogRecord(record.__dict__)
        clean.msg, clean.args = _message(record), None
        fields = current_fields()
        if fields:
            clean.msg += " [" + " ".join(f"{k}={fields[k]}" for k in _FIELDS if k in fields) + "]"
        exc = _traceback(self, record)
        if exc is not None:
            clean.msg += " | " + escape_line_breaks(exc)
        clean.exc_info = clean.exc_text = clean.stack_info = None
        return super().format(clean)


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler :func:`configure` installed, so a second call replaces it."""


def configure(
    settings: Settings | None = None,
    *,
    level: str | None = None,
    fmt: str | None = None,
    stream: TextIO | None = None,
    force: bool = True,
) -> bool:
    """Send all records to *stream* (stderr) as ``text`` or ``json`` at *level* (defaults:
    *settings*), replacing an earlier call's handler. With ``force=False`` nothing changes
    when the application has root handlers of its own; returns whether it installed one."""
    level = level or (settings.log_level if settings is not None else "info")
    fmt = fmt or (settings.log_format if settings is not None else "text")
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _Handler)]
    if not force and len(ours) != len(root.handlers):
        return False
    for handler in ours:
        root.removeHandler(handler)
    handler = _Handler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    return True
