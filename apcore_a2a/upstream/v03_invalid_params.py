"""A JSON-RPC 0.3 call with a valid envelope but invalid ``params`` answered ``-32602``.

Upstream (a2a-sdk 1.3, ``a2a.compat.v0_3.jsonrpc_adapter.JSONRPC03Adapter``): the 0.3
adapter validates the whole request with its 0.3 pydantic model and answers any
``ValidationError`` as ``-32600 Invalid Request``, also when only ``params`` is wrong (a
fractional ``historyLength``, a ``role`` 0.3 does not define, a missing task id). JSON-RPC
2.0 §5.1 has ``-32602 Invalid params`` for those, and the genuine a2a-sdk 0.3 server
answered them so (it validated the envelope first, then the method's request:
``InvalidParamsError``, "Invalid parameters"). The envelope itself (``jsonrpc``,
``method``, ``id``) is checked by the SDK's dispatcher before the adapter, and an ``id`` of
a wrong type still reaches the adapter's model: such a request stays ``-32600``.

Valid requests cost nothing here: only an answer the adapter already refused with
``-32600`` (read back by the answer side, ``streams/answers.py``) is looked at, and its
request validated again with the adapter's own model (public ``METHOD_TO_MODEL``, the
models of ``a2a.compat.v0_3.types``) to learn where it failed; when every error lies
under ``params`` the answer becomes 0.3's ``InvalidParamsError``, its data the first
failures' types, locations and messages (not the input they echo).
``tests/upstream/test_v03_invalid_params.py`` fails the day the SDK answers such a request
``-32602`` itself (delete this then).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from pydantic import BaseModel, ValidationError

from apcore_a2a.classify import RequestInfo

#: characters the failures listed in the answer's data take at most (a union of parts fails
#: many ways; an error answer stays short: ``streams/scrub.py``)
_MAX_LISTED = 300


def invalid_params_03(info: RequestInfo, error: dict[str, Any]) -> dict[str, Any]:
    """*error*, the error object the SDK answered *info*'s request, as ``-32602`` when the
    0.3 adapter refused a request whose only fault is its ``params``; else *error* as is."""
    if error.get("code") != -32600 or info.binding != "jsonrpc" or info.version != "0.3":
        return error
    model = JSONRPC03Adapter.METHOD_TO_MODEL.get(info.rpc_method or "")
    payload = info.payload
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return error
    if not isinstance(payload, dict):
        return error
    try:
        model.model_validate(payload)
    except ValidationError as exc:
        failures = exc.errors(include_url=False, include_input=False, include_context=False)
    else:
        return error  # refused for another reason: as the SDK answered
    if not failures or any(f["loc"][:1] != ("params",) for f in failures):
        return error  # the envelope is invalid: the request is
    data: list[dict[str, Any]] = []
    room = _MAX_LISTED
    for failure in failures:
        listed = {"type": failure["type"], "loc": list(failure["loc"]), "msg": failure["msg"]}
        room -= len(json.dumps(listed))
        if room < 0 and data:
            break
        data.append(listed)
    return types_v03.InvalidParamsError(data=data).model_dump(by_alias=True)
