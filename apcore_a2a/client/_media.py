"""An answer's ``Content-Type`` as the client reads it: parsed, never matched as a substring.

A media type is ``type "/" subtype`` then ``; name=value`` parameters, both names
case-insensitive (RFC 9110 §8.3.1). Searched for as a substring, ``application/jsonx``,
``application/json-seq`` or ``text/html; note=application/json`` passed as JSON and
``text/event-streamx`` as a stream. JSON is ``application/json`` or a type with the
``+json`` structured suffix (RFC 6839 §3.1), such as ``application/a2a+json``.
"""

from __future__ import annotations

import re

from apcore_a2a._text import message_line

#: an RFC 9110 token: what a type and a subtype are made of
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")

EVENT_STREAM = "text/event-stream"


def essence(header: str | None) -> str | None:
    """The ``type/subtype`` of a ``Content-Type`` header, lowercase; ``None`` when the
    header is absent or is no media type."""
    if header is None:
        return None
    kind = header.partition(";")[0].strip()
    main, slash, sub = kind.partition("/")
    if not slash or not _TOKEN.fullmatch(main) or not _TOKEN.fullmatch(sub):
        return None
    return kind.lower()


def is_json(header: str | None) -> bool:
    """Whether *header* names JSON: ``application/json`` or ``application/*+json``."""
    main, _, sub = (essence(header) or "").partition("/")
    if main != "application":
        return False
    return sub == "json" or (sub.endswith("+json") and sub != "+json")


def event_stream(header: str | None) -> str | None:
    """*header* with its type written ``text/event-stream`` (its parameters, the charset
    among them, kept) when it names an SSE stream, else ``None``. The spelling is the one
    a2a-sdk and httpx-sse look for (as a substring, case-sensitive), so a stream an agent
    names ``Text/Event-Stream`` is read as one."""
    if header is None or essence(header) != EVENT_STREAM:
        return None
    _, semicolon, parameters = header.partition(";")
    return EVENT_STREAM + semicolon + parameters


def shown(header: str | None) -> str:
    """*header* for a message: one line of at most 100 characters, its spaces as sent."""
    return message_line(header or "")[:100] or "no content type"
