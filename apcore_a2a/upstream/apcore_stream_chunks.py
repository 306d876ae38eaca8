"""A streaming module's chunk that is no object, answered as the module's failure.

apcore 0.32's ``Executor.stream`` refuses a chunk that is not a JSON object (a string, a
list) with ``InvalidInputError``: code ``GENERAL_INVALID_INPUT``, the code of a caller's
bad input, for the module's own output (its details say ``STREAM_CHUNK_NOT_OBJECT``). No
caller can fix it: the agent reads it as the module's failure, ``ModuleExecuteError``
("Module execution failed": a task ``failed``, a message reply -32603 / HTTP 500 /
``INTERNAL``), with apcore's words for the log and apcore's error as its cause.
"""

from __future__ import annotations

from apcore.errors import ModuleExecuteError

#: the detail apcore's stream gives a chunk that is no object
_NOT_OBJECT = "STREAM_CHUNK_NOT_OBJECT"


def raise_module_fault(exc: Exception, module_id: str) -> None:
    """Raise the module failure *exc* stands for when it is apcore's refusal of a chunk
    *module_id* (or a stream it read) yielded; return otherwise."""
    details = getattr(exc, "details", None)
    if getattr(exc, "code", None) != "GENERAL_INVALID_INPUT" or not isinstance(details, dict):
        return
    if details.get("code") == _NOT_OBJECT:
        message = str(getattr(exc, "message", exc))
        raise ModuleExecuteError(module_id, message=message) from exc
