"""A ``ListTasks`` ``statusTimestampAfter`` that is no valid ``google.protobuf.Timestamp``
(seconds outside years 1 to 9999, nanos outside ``0..999999999``) is invalid params,
refused by the request handler's guard (``storage/fields.py`` ``held_ids``) before any
store, the application's own included.

Only gRPC carries such a value (ProtoJSON's parser refuses it on JSON-RPC and REST:
``-32602`` / 400). a2a-sdk 1.3 hands it to the store, whose ``ToDatetime()`` raises
``ValueError``: answered ``INTERNAL`` (a plain SDK agent: ``UNKNOWN``, naming the Python
class) and logged at ERROR with a traceback, for a caller's bad value.
"""

from __future__ import annotations

from a2a.types import ListTasksRequest
from a2a.utils.errors import InvalidParamsError

BAD_TIME = (
    "statusTimestampAfter must be a time from 0001-01-01T00:00:00Z to "
    "9999-12-31T23:59:59.999999999Z (nanos from 0 to 999999999)"
)


def timestamp_error(params: ListTasksRequest) -> InvalidParamsError | None:
    """The refusal of *params* whose ``statusTimestampAfter`` no store can read, else
    ``None``: checked as the stores read it (``ToDatetime``)."""
    if not params.HasField("status_timestamp_after"):
        return None
    try:
        params.status_timestamp_after.ToDatetime()
    except (ValueError, OverflowError):
        return InvalidParamsError(message=BAD_TIME)
    return None
