"""Every ``google.rpc.ErrorInfo.metadata`` value of the SDK's error details a string (our
own errors carry text there from the start; their lists stay lists in ``data``, for the
SDK's ``BadRequest``, 0.3's ``data`` and the scrubber, which cuts item by item)."""

from __future__ import annotations

import json
from typing import Any

#: the ``@type`` of the detail whose ``metadata`` is a ``map<string, string>``
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def string_metadata(error: dict[str, Any]) -> dict[str, Any]:
    """*error* (a JSON-RPC 1.0 or REST error object as the SDK renders it) with every
    ``ErrorInfo.metadata`` value a string: a number or a list as its compact JSON text
    (``30``, ``["a","b"]``)."""
    key = "details" if isinstance(error.get("status"), str) else "data"
    details = error.get(key)
    if not isinstance(details, list):
        return error
    items = []
    for item in details:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if item.get("@type") == _ERROR_INFO and isinstance(metadata, dict):
            item = {**item, "metadata": {k: _text(v) for k, v in metadata.items()}}
        items.append(item)
    return {**error, key: items}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
