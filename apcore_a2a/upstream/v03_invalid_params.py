"""A JSON-RPC 0.3 call with a valid envelope but invalid ``params`` answered ``-32602``.

Only an answer the SDK's 0.3 adapter already gave ``-32600`` is looked at: its request is
validated again with the adapter's own model (public ``METHOD_TO_MODEL``) and, when every
failure lies under ``params``, the answer becomes 0.3's ``InvalidParamsError``.
"""

from __future__ import annotations

import apcore_a2a.upstream.client_first  # noqa: F401  (before the SDK server: see it)

# isort: split
import json
from typing import Any

import a2a.server.routes  # noqa: F401  (first: jsonrpc_adapter alone is a circular import)
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
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return error
    if not isinstance(info.payload, dict):
        return error
    try:
        model.model_validate(info.payload)
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
