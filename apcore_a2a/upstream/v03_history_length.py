"""A 0.3 ``historyLength`` no int32 holds (REST query: no integer) refused as invalid params,
checked from the request record before the SDK fails on it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from a2a.utils.errors import InvalidParamsError

from apcore_a2a._text import echoed
from apcore_a2a.classify import RequestInfo

_INT32 = range(-(2**31), 2**31)


def history_length_error(info: RequestInfo, query: bytes) -> InvalidParamsError | None:
    """The refusal of a 0.3 call (*query*: the URL's query string) whose ``historyLength``
    the SDK would fail on, else ``None`` (other values go on to the SDK's own checks)."""
    if info.version != "0.3":
        return None
    if info.binding == "rest":
        if info.method != "GetTask":
            return None  # a body's configuration is parsed by json_format: 400 already
        sent = parse_qs(query.decode("latin-1")).get("historyLength")
        if not sent:
            return None
        try:
            value: Any = int(sent[-1])
        except ValueError:
            return _refusal(sent[-1])
    else:
        params = info.payload.get("params") if isinstance(info.payload, dict) else None
        if not isinstance(params, dict):
            return None
        config = params.get("configuration")
        holder = config if isinstance(config, dict) else params
        value = holder.get("historyLength")
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT32:
        return _refusal(value)
    return None


def _refusal(value: Any) -> InvalidParamsError:
    shown = echoed(value)
    return InvalidParamsError(
        message=f"historyLength must be an integer from 0 to {2**31 - 1}, not {shown}"
    )
