"""apcore errors -> A2A outcomes, with the sanitizing rules (pure).

:func:`map_error` classifies every exception that leaves an apcore call. Outcome
``"raise"``: the request was wrong, the call answers with ``a2a_error`` (-32602 with field
errors, -32601) when no task exists yet; after, the task ends ``failed``. ``"failed"`` /
``"rejected"`` / ``"canceled"``: the task ends in that state, its status message carrying
a text part and a data part ``{"code", "message", "type"}``; a module's output its schema
refuses, or the input of a call the module makes, is such a failure, not the caller's
error. Client-facing messages have no file paths, no traceback lines, at most 500
characters. :data:`ERROR_TABLE` is the table documented in the README.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
)

from apcore_a2a._text import escape_controls, escape_invisible
from apcore_a2a._text import message_line as message_line  # its callers import it here

Outcome = Literal["raise", "failed", "rejected", "canceled"]

MAX_MESSAGE = 500
MAX_LOG = 1000

# A server path is rooted (``/srv/app``, ``~/app``, ``C:\\app``), or relative and naming a file
# (``data/tasks.db``, ``config.py:3``: a lower-case extension, so not a type URL's
# ``google.rpc.ErrorInfo``) or in a dot folder (``.venv/lib/x``); a caller's relative name
# (``tasks/t/pushNotificationConfigs/c``) is none of these.
# (A backslash before ``x`` and two hex digits is no separator: it is how a control
# character a caller sent is written back, ``_text.escape_controls``.)
_SEP = r"""(?:/|\\(?!x[0-9a-f]{2}))"""
_PATH_RE = re.compile(
    rf"""(?<![\w.\-+@~])(?:[A-Za-z]:|~)?(?:{_SEP}[\w.\-+@~ ]+){{2,}}{_SEP}?"""
    rf"""|(?<![\w.\-+@~\\/])(?:[\w.\-]+{_SEP})+[\w\-]*(?:\.\w+)*\.[a-z][a-z0-9]{{0,7}}"""
    r"""(?![\w.\-])(?::\d+)?"""
    rf"""|(?<![\w.\-+@~\\/])\.[\w.\-]*(?:{_SEP}[\w.\-]+)+"""
    r"""|(?<![\w.\-+@~\\/])[\w\-]+(?:\.[\w\-]+)*\.py\b(?::\d+)?"""
)
_SEPARATOR = re.compile(r"[\\/]")
_TRACE_RE = re.compile(r"Traceback \(most recent call last\).*", re.DOTALL)
_FRAME_RE = re.compile(r'^\s*File ".*$', re.MULTILINE)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sanitize(text: str, limit: int = MAX_MESSAGE, said: Collection[str] = ()) -> str:
    """Make *text* safe to show a client: no paths, no traceback, bounded length. A path
    inside one of *said*, the caller's own values in its request (which an answer may quote
    back: ``Skill not found: /v1/typo``), is the caller's to see and stays."""
    text = _FRAME_RE.sub("", _TRACE_RE.sub("", str(text)))
    text = _PATH_RE.sub(lambda found: _shown(found[0], said), text)
    text = escape_controls(text, _CONTROL_RE).strip()
    return text[: limit - 3] + "..." if len(text) > limit else text


def _shown(path: str, said: Collection[str]) -> str:
    for value in said:
        # A rooted path's segments may hold spaces: "/v1/typo was not found" is the
        # caller's "/v1/typo" and words, where "/v1/typo x/y" may be more of a path.
        if path in value or (path.startswith(value) and not _SEPARATOR.search(path, len(value))):
            return path
    return "<path>"


def clean_for_log(value: Any, limit: int = MAX_LOG) -> str:
    """Client-supplied text for a log line: control characters (but tabs and line breaks,
    :func:`escape_line_breaks`' to write) shown escaped as an echoed value is (``\\x1b``:
    :func:`~apcore_a2a._text.escape_controls`), not dropped, so ``a\\x1b[2Jb`` never reads
    as ``ab``; line separators and bidi controls escaped
    (:func:`~apcore_a2a._text.escape_invisible`); truncated."""
    text = escape_invisible(escape_controls(str(value), _CONTROL_RE))
    if len(text) > limit:
        text = text[:limit] + f"...[{len(text) - limit} more chars]"
    return text


def one_line(value: Any, limit: int = MAX_LOG) -> str:
    """Client-supplied text as an argument of a log message: :func:`clean_for_log` with its
    line breaks escaped, so the record is one line under any formatter (an application
    that configures logging itself keeps its own, which does not escape them)."""
    return escape_line_breaks(clean_for_log(value, limit))


def escape_line_breaks(cleaned: str) -> str:
    """*cleaned* (:func:`clean_for_log` output: no ``\\r`` left) on one line: line breaks
    escaped, tabs as spaces."""
    return cleaned.replace("\n", "\\n").replace("\t", " ")


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """One row of the error table."""

    code: str
    outcome: Outcome
    a2a: type[A2AError] | None
    client_message: str | None  # None: use the (sanitized) apcore message
    log_level: str = "error"


#: apcore error code -> what the client sees. ``a2a`` is the A2A error class raised for
#: ``outcome == "raise"`` rows.
ERROR_TABLE: dict[str, ErrorRule] = {
    r.code: r
    for r in (
        ErrorRule("MODULE_NOT_FOUND", "raise", MethodNotFoundError, None, "warning"),
        ErrorRule("MODULE_DISABLED", "raise", MethodNotFoundError, None, "warning"),
        ErrorRule("SCHEMA_VALIDATION_ERROR", "raise", InvalidParamsError, None, "info"),
        ErrorRule("GENERAL_INVALID_INPUT", "raise", InvalidParamsError, None, "info"),
        # The ACL's refusal of the skill itself is answered before map_error (the request
        # context builder's ``acl_refusal``); what reaches the table is a call the module
        # makes: the agent's policy refused its own module, not the caller, whose skill it
        # is (the module's target is not named).
        ErrorRule(
            "ACL_DENIED",
            "failed",
            None,
            "Permission denied: a call this skill makes was refused",
            "warning",
        ),
        ErrorRule("APPROVAL_DENIED", "rejected", None, None, "info"),
        ErrorRule("APPROVAL_TIMEOUT", "failed", None, "Approval timed out", "warning"),
        ErrorRule("MODULE_TIMEOUT", "failed", None, "Execution timed out", "warning"),
        ErrorRule("EXECUTION_CANCELLED", "canceled", None, "Canceled", "info"),
        ErrorRule("MODULE_EXECUTE_ERROR", "failed", None, "Module execution failed", "error"),
        ErrorRule("CALL_DEPTH_EXCEEDED", "failed", None, "Call depth exceeded", "warning"),
        ErrorRule("CIRCULAR_CALL", "failed", None, "Circular call detected", "warning"),
        ErrorRule("CALL_FREQUENCY_EXCEEDED", "failed", None, "Call frequency exceeded", "warning"),
        ErrorRule("CIRCUIT_BREAKER_OPEN", "failed", None, "Temporarily unavailable; retry later"),
        ErrorRule("CIRCUIT_OPEN", "failed", None, "Temporarily unavailable; retry later"),
        ErrorRule("TASK_LIMIT_EXCEEDED", "failed", None, "Too many tasks; retry later"),
        ErrorRule("GENERAL_INTERNAL_ERROR", "failed", None, "Internal error"),
    )
}

#: Unknown apcore codes (custom ``ModuleError`` codes raised by modules on purpose) keep
#: their code and sanitized message; any other exception becomes an internal error.
_CUSTOM = ErrorRule("*", "failed", None, None, "warning")
_UNKNOWN = ErrorRule("INTERNAL_ERROR", "failed", InternalError, "Internal error", "error")
#: a module's output its schema refuses: apcore's code, but no caller can fix it
_BAD_OUTPUT = ErrorRule(
    "SCHEMA_VALIDATION_ERROR", "failed", None, "Module output does not match its schema"
)
#: the input of a call the module made was refused (by the called module's schema, or as
#: invalid by that module or apcore): the module's fault, not the caller's (the called
#: module and its field errors are not named)
_BAD_CALL = {
    code: ErrorRule(code, "failed", None, f"Input of a call this skill makes {words}")
    for code, words in (
        ("SCHEMA_VALIDATION_ERROR", "does not match its schema"),
        ("GENERAL_INVALID_INPUT", "is invalid"),
    )
}
#: a call the module made names a module not served (mistyped, removed, disabled): the
#: module's fault; the caller's own skill exists, and the missing one is not named
_MISSING_CALL = ErrorRule(
    "MODULE_NOT_FOUND", "failed", None, "A call this skill makes names no module the agent serves"
)


@dataclass(frozen=True, slots=True)
class MappedError:
    """How one exception is presented over A2A."""

    outcome: Outcome
    code: str
    message: str
    type: str
    log_level: str
    a2a_error: A2AError | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def status_data(self) -> dict[str, Any]:
        """The data part of a failed task's status message."""
        return {"code": self.code, "message": self.message, "type": self.type, **self.details}


def _field_errors(exc: Any) -> list[dict[str, str]]:
    details = getattr(exc, "details", None) or {}
    raw = details.get("errors") if isinstance(details, dict) else None
    return [
        {
            "field": str(item.get("path") or item.get("field") or "/"),
            "message": sanitize(str(item.get("message", "")), 200),
        }
        for item in raw or ()
        if isinstance(item, dict)
    ]


def _detail(exc: BaseException, key: str) -> Any:
    """What *exc*'s details hold under *key*, if it has details."""
    details = getattr(exc, "details", None)
    return details.get(key) if isinstance(details, dict) else None


def _nested(exc: BaseException, module_id: str | None, key: str) -> bool:
    """Whether *exc* names, under *key* of its details, a module other than *module_id*."""
    target = _detail(exc, key)
    return module_id is not None and target is not None and target != module_id


def nested_input(exc: BaseException, module_id: str | None) -> bool:
    """Whether *exc* refused the input of a call *module_id* made, not the caller's input:
    apcore names the module whose input it refused as the error's ``module_id`` detail."""
    return getattr(exc, "code", None) in _BAD_CALL and _nested(exc, module_id, "module_id")


def own_denial(exc: BaseException, module_id: str) -> bool:
    """Whether *exc* is the ACL's refusal of the skill's own module *module_id* (not of a
    call the module makes)."""
    return getattr(exc, "code", None) == "ACL_DENIED" and _detail(exc, "target_id") == module_id


def map_error(
    exc: BaseException,
    *,
    module_id: str | None = None,
    bad_output: bool = False,
) -> MappedError:
    """Classify *exc* raised while running *module_id* (see module docstring).
    *bad_output*: *exc* refused a module's output (apcore gives it its input's code)."""
    code = getattr(exc, "code", None)
    is_module_error = isinstance(code, str) and hasattr(exc, "details")
    rule = ERROR_TABLE.get(str(code), _CUSTOM) if is_module_error else _UNKNOWN
    if rule.code == "SCHEMA_VALIDATION_ERROR" and bad_output:
        rule = _BAD_OUTPUT
    elif nested_input(exc, module_id):
        rule = _BAD_CALL[str(code)]
    elif rule.a2a is MethodNotFoundError and _nested(exc, module_id, "module_id"):
        rule = _MISSING_CALL
    code = str(code) if is_module_error else rule.code
    message = rule.client_message or sanitize(getattr(exc, "message", None) or str(exc))
    if rule.a2a is MethodNotFoundError and module_id:  # the caller's own skill
        what = "not found" if code == "MODULE_NOT_FOUND" else "is disabled"
        message = f"Skill {what}: {module_id}"
    elif code == "APPROVAL_DENIED":
        reason = getattr(exc, "reason", None)
        message = f"Approval denied: {sanitize(reason, 300)}" if reason else "Approval denied"
    type_name = type(exc).__name__ if is_module_error else "InternalError"
    details: dict[str, Any] = {}
    a2a_error: A2AError | None = None
    if rule.outcome == "raise" and rule.a2a is not None:
        data: dict[str, Any] = {"type": type_name, "apcoreCode": code}
        errors = _field_errors(exc) if rule.a2a is InvalidParamsError else []
        if errors:
            data["errors"] = details["errors"] = errors
        a2a_error = rule.a2a(message=message, data=data)
    return MappedError(rule.outcome, code, message, type_name, rule.log_level, a2a_error, details)


class ExecutionTimeout(Exception):
    """Stand-in for an apcore ``MODULE_TIMEOUT`` raised by the server's own deadline."""

    code = "MODULE_TIMEOUT"
    details: dict[str, Any] = {}
    message = "Execution timed out"


def as_a2a_error(mapped: MappedError) -> A2AError:
    """The A2A error a request answers with when *mapped* cannot become a task state."""
    if mapped.a2a_error is not None:
        return mapped.a2a_error
    # The apcore code marks the message as ours (already sanitized), so the error
    # scrubbing keeps it instead of answering a bare "Internal error".
    return InternalError(message=mapped.message, data={"apcoreCode": mapped.code})
