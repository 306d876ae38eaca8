"""``A2A-Version`` sent as a request parameter is read as the header (spec §3.6.1)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import Scope

_NAME = "a2a-version"


def version_from_param(scope: Scope, params: Iterable[tuple[int, str, str]]) -> str | None:
    """The first ``A2A-Version`` (any case) of *params*, the request record's one parse of
    its query (``RequestInfo.params``), stripped as a header's value is, and added to
    *scope*'s headers for every layer below; ``None`` when there is none or a header is
    already sent."""
    headers = scope.get("headers") or []
    if any(key == _NAME.encode() for key, _ in headers):
        return None
    for _pair, key, value in params:
        if key.lower() == _NAME:
            version = value.strip()
            # Header values are bytes. A value outside latin-1 is no version: the version
            # rule refuses it, in the caller's own characters, before the SDK reads this.
            scope["headers"] = [*headers, (_NAME.encode(), version.encode("latin-1", "replace"))]
            return version
    return None
