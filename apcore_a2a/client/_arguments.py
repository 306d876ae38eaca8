"""What ``A2AClient`` refuses of its arguments before any request, with ``ValueError``: an
agent URL that is no absolute http(s) URL, a header value httpx could not send, an empty
id, a timeout that is not positive, a negative retry count."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from apcore_a2a.client.card import CARD_PATHS

#: An HTTP field value as h11 sends one (RFC 9110 §5.5): visible ASCII, spaces and tabs
#: between its characters only. h11 refuses any other as it sends, repeating the value.
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")


def normalize_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """The agent's base URL, and the ``user:password`` it carried (then taken out of it, so
    that no message repeats the password)."""
    if not isinstance(url, str):
        raise ValueError(f"agent URL must be a string, got {type(url).__name__}")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"agent URL must be an absolute http(s) URL, got {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"agent URL must not carry a query or fragment, got {url!r}")
    userinfo, at, host = parts.netloc.rpartition("@")
    credentials = None
    if at:
        user, _, password = userinfo.partition(":")
        credentials = (unquote(user), unquote(password))
    base = parts._replace(netloc=host).geturl().rstrip("/")
    for path in CARD_PATHS:  # a card URL given by mistake names the same agent
        base = base.removesuffix(path)
    return base.rstrip("/"), credentials


def header_value(value: str, what: str) -> str:
    """*value* when it can be sent as an HTTP header value. httpx refuses it only later,
    with a bare encoding error (the value's position) or, for a line break, as a failed
    connection; the value (often a credential) is not repeated here."""
    if not isinstance(value, str) or not sendable(value):
        raise ValueError(
            f"{what} must be ASCII text without line breaks, control characters or spaces "
            "at either end (an HTTP header value)"
        )
    return value


def sendable(value: str) -> bool:
    """Whether *value* can be sent as an HTTP header value."""
    return _FIELD_VALUE.fullmatch(value) is not None


def positive(timeout: float | None) -> float | None:
    if timeout is not None and not timeout > 0:  # NaN too: every wait would end at once
        raise ValueError("timeout must be positive (or None for no timeout)")
    return timeout


def stream_bounds(max_retries: int, timeout: float | None) -> tuple[int, float | None]:
    if max_retries < 0:
        raise ValueError("max_retries must be 0 or more")
    return max_retries, positive(timeout)


def require_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value
