"""A REST request whose JSON protobuf cannot read into the method's request (a value of
another type: ``"messageId": 5``, ``"historyLength": "abc"``, ``?statusTimestampAfter=
yesterday``) answered as invalid params (reason ``INVALID_PARAMS``), as JSON-RPC answers
the same params (``-32602``) and as a REST query integer that is none is refused
(``wire_values.py``): A2A 1.0.1 §5.1, one fault, one error on every binding.

a2a-sdk 1.3's REST error handler answers protobuf's ``ParseError`` 400 with reason
``INVALID_REQUEST`` (its REST clients raise ``InvalidRequestError``), where its JSON-RPC
dispatcher answers it ``InvalidParamsError``. Only an answer the SDK's route gave itself is
looked at (``streams/scrub.py:error_body``), after a body that is no JSON was answered
(that stays ``INVALID_REQUEST``, as JSON-RPC's ``-32700``). The one other ``INVALID_REQUEST``
of the SDK's REST routes, a body that could not be read before a stream, cannot reach it:
the edge has read every body before the route runs.
"""

from __future__ import annotations

from typing import Any

from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import InvalidParamsError

from apcore_a2a.classify import RequestInfo


def invalid_params_rest(info: RequestInfo, error: dict[str, Any]) -> dict[str, Any]:
    """*error*, the REST error object the SDK answered *info*'s request, as invalid params
    when it is the SDK's answer to a ``ParseError`` (its one ``ErrorInfo``, reason
    ``INVALID_REQUEST``, no metadata); else *error* as is. The message (protobuf's words,
    naming the field) is kept."""
    details = error.get("details")
    parsed = (
        info.binding == "rest"
        and error.get("status") == "INVALID_ARGUMENT"
        and isinstance(details, list)
        and len(details) == 1
        and isinstance(details[0], dict)
        and details[0].get("reason") == "INVALID_REQUEST"
        and not details[0].get("metadata")
    )
    if not parsed:
        return error
    message = error.get("message")
    refusal = InvalidParamsError(message=message if isinstance(message, str) else None)
    fixed: dict[str, Any] = build_rest_error_payload(refusal)["error"]
    return fixed
