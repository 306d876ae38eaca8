"""Event ids on gRPC streams: what the SSE ``id:`` line is on HTTP.

``StreamResponse`` has no id field and gRPC has no per-message metadata, so the id of each
streamed event (its position in the task's event log, the same number an SSE stream
sends) travels as an *unknown field* of the ``StreamResponse``: field number
:data:`EVENT_ID_FIELD`, length-delimited, the id as UTF-8 text. Protobuf parsers keep
unknown fields and otherwise ignore them, so official A2A clients (1.0 and 0.3) read the
response as usual; a client that wants to resume reads the id with :func:`event_id_of`
(or any protobuf library's unknown-field API) and sends the last one as call metadata
``last-event-id`` on ``SubscribeToTask``.
"""

from __future__ import annotations

from google.protobuf import unknown_fields
from google.protobuf.message import Message

__all__ = ["EVENT_ID_FIELD", "event_id_of", "stamp_event_id"]

#: field number of the event id; far above any number the A2A schemas use
EVENT_ID_FIELD = 20_000
_LENGTH_DELIMITED = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def stamp_event_id(response: Message, event_id: str) -> None:
    """Add *event_id* to *response* as the unknown field :data:`EVENT_ID_FIELD`."""
    data = event_id.encode()
    key = _varint(EVENT_ID_FIELD << 3 | _LENGTH_DELIMITED)
    response.MergeFromString(key + _varint(len(data)) + data)


def event_id_of(response: Message) -> str | None:
    """The event id a gRPC ``StreamResponse`` (1.0 or 0.3) carries, if any."""
    for field in unknown_fields.UnknownFieldSet(response):
        if field.field_number == EVENT_ID_FIELD and field.wire_type == _LENGTH_DELIMITED:
            return bytes(field.data).decode()
    return None
