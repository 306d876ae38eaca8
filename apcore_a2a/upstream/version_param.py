"""``A2A-Version`` sent as a request parameter is read as the header (spec §3.6.1)."""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.types import Scope

_NAME = "a2a-version"


def version_from_param(scope: Scope) -> bytes | None:
    """The first ``A2A-Version`` request parameter (any case), added to *scope*'s headers
    for every layer below; ``None`` when there is none or a header is already sent."""
    headers = scope.get("headers") or []
    if any(key == _NAME.encode() for key, _ in headers):
        return None
    query = bytes(scope.get("query_string") or b"").decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.lower() == _NAME:
            # Header values are bytes; a value outside latin-1 stays unsupported, not lost.
            raw = value.encode("latin-1", "replace")
            scope["headers"] = [*headers, (_NAME.encode(), raw)]
            return raw
    return None
