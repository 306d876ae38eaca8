"""A module's output that fails its output schema, told apart from a caller's bad input.

apcore 0.32 raises the same ``SchemaValidationError`` (code ``SCHEMA_VALIDATION_ERROR``)
for both: its output-validation step differs only in the words its message starts with.
The caller cannot fix a module's output, so the agent answers it as a module failure
(``adapters/errors.py``), not as invalid params.
"""

from __future__ import annotations

#: how apcore's output-validation step starts its error's message
_OUTPUT_FAILED = "Output validation failed"


def output_invalid(exc: BaseException) -> bool:
    """Whether *exc* is apcore's refusal of a module's output (its own, or a call's it made)."""
    message = getattr(exc, "message", None)
    return (
        getattr(exc, "code", None) == "SCHEMA_VALIDATION_ERROR"
        and isinstance(message, str)
        and message.startswith(_OUTPUT_FAILED)
    )
