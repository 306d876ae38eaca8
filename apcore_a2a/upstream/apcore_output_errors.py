"""A module's own fault that apcore answers with a caller's-input error code, told apart.

apcore 0.32 refuses a module's output with the codes it refuses a caller's input with. No
caller can fix a module's output, so the agent answers both cases as the module's failure
(a task ``failed``, a message reply -32603 / HTTP 500 / ``INTERNAL``), not as invalid
params:

* an output its output schema refuses: apcore raises the same ``SchemaValidationError``
  (code ``SCHEMA_VALIDATION_ERROR``) as for a bad input; its output-validation step
  differs only in the words its message starts with, and an output schema given as JSON
  Schema (apcore's ``_DictSchemaAdapter``: its own system modules, YAML bindings) refuses
  an output in the words of a bad input ("Input validation failed"), so such a refusal is
  told by the step it was raised in (``output_invalid``; mapped in ``adapters/errors.py``);
* a streaming module's chunk that is not a JSON object (a string, a list): apcore's
  ``Executor.stream`` refuses it with ``InvalidInputError``, code ``GENERAL_INVALID_INPUT``
  (its details say ``STREAM_CHUNK_NOT_OBJECT``); the agent raises ``ModuleExecuteError``
  ("Module execution failed") instead, with apcore's words for the log and apcore's error
  as its cause (``raise_module_fault``).
"""

from __future__ import annotations

from apcore.builtin_steps import BuiltinOutputValidation
from apcore.errors import ModuleExecuteError

#: how apcore's output-validation step starts its error's message
_OUTPUT_FAILED = "Output validation failed"
_STEP = BuiltinOutputValidation.execute.__code__
#: the detail apcore's stream gives a chunk that is no object
_NOT_OBJECT = "STREAM_CHUNK_NOT_OBJECT"


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


def raise_module_fault(exc: Exception, module_id: str) -> None:
    """Raise the module failure *exc* stands for when it is apcore's refusal of a chunk
    *module_id* (or a stream it read) yielded; return otherwise."""
    details = getattr(exc, "details", None)
    if getattr(exc, "code", None) != "GENERAL_INVALID_INPUT" or not isinstance(details, dict):
        return
    if details.get("code") == _NOT_OBJECT:
        message = str(getattr(exc, "message", exc))
        raise ModuleExecuteError(module_id, message=message) from exc
