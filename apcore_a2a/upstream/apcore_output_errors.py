"""A module's output that fails its output schema, told apart from a caller's bad input.

apcore 0.32 raises the same ``SchemaValidationError`` (code ``SCHEMA_VALIDATION_ERROR``)
for both: its output-validation step differs only in the words its message starts with,
and an output schema given as JSON Schema (apcore's ``_DictSchemaAdapter``: its own
system modules, YAML bindings) refuses an output in the words of a bad input ("Input
validation failed"), so such a refusal is told by the step it was raised in. The caller
cannot fix a module's output, so the agent answers it as a module failure
(``adapters/errors.py``), not as invalid params.
"""

from __future__ import annotations

from apcore.builtin_steps import BuiltinOutputValidation

#: how apcore's output-validation step starts its error's message
_OUTPUT_FAILED = "Output validation failed"
_STEP = BuiltinOutputValidation.execute.__code__


def output_invalid(exc: BaseException) -> bool:
    """Whether *exc* is apcore's refusal of a module's output (its own, or a call's it made)."""
    if getattr(exc, "code", None) != "SCHEMA_VALIDATION_ERROR":
        return False
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message.startswith(_OUTPUT_FAILED):
        return True
    frame = exc.__traceback__
    while frame is not None and frame.tb_frame.f_code is not _STEP:
        frame = frame.tb_next
    return frame is not None
