"""A text of several lines as one line for a person: the one rule the server's messages and
the client's errors share (a leaf: it imports nothing, so every room may import it)."""

from __future__ import annotations

import re
from typing import Any


def message_line(text: str) -> str:
    """*text* (pydantic's, YAML's and a database's messages run to several lines) as one
    line for a person to read: its lines joined by a space, each stripped. Spaces inside a
    line stay as they are: a refusal quoting ``'no  such'`` must not say ``'no such'``.
    (``adapters.errors.one_line`` is for a log argument: it escapes the line breaks
    instead.)"""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


#: The most characters of a caller's value an answer or a log line quotes back.
ECHO_LIMIT = 64
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: No control characters, but a log viewer may start a new line at them (U+2028, U+2029)
#: or show what follows reversed (bidi embeddings, overrides, isolates): a caller could
#: forge what an operator reads.
_INVISIBLE = re.compile("[\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_invisible(text: str) -> str:
    """*text* with its line separators and bidi controls escaped (``\\u2028``)."""
    return _INVISIBLE.sub(lambda found: f"\\u{ord(found[0]):04x}", text)


def escape_controls(text: str, controls: re.Pattern[str] = _CONTROL) -> str:
    """*text* with the characters *controls* finds (every C0 and C1 control, DEL) written
    as ``\\x00``: a caller's value quoted back as it was sent, and still readable."""
    return controls.sub(lambda found: f"\\x{ord(found[0]):02x}", text)


def echoed(value: object, *, quote: bool = False, limit: int = ECHO_LIMIT) -> str:
    """A caller's *value* as an answer or a log line quotes it back: at most *limit*
    characters of it (``repr``'d with *quote*), then ``… (N characters)`` when it was
    longer, so a 1 MB bad value never makes a 1 MB answer, log line or span. Unquoted,
    :func:`escape_controls` and :func:`escape_invisible` apply (quoted, ``repr`` escapes
    both)."""
    text = value if isinstance(value, str) else str(value)
    shown = repr(text[:limit]) if quote else escape_invisible(escape_controls(text[:limit]))
    return shown if len(text) <= limit else f"{shown}… ({len(text)} characters)"


# The password runs to the last '@': an unencoded '/', ':' or '@' in it must not end it
# early (masking part of the host too is the safe side). The scheme and its "//" are
# optional (each), so a value refused for its shape (memory:user:PASSWORD@x, or
# //user:PASSWORD@db, its scheme left out) is masked too; the user name has no space, so a
# sentence naming "memory://" and "user@host" is not; a scheme is not a user name
# (https://TOKEN@host is a user name alone). After a scheme, the user name may hold an
# unencoded '@' (Azure's user@server): parsers split user from host at the last '@' (what
# precedes its first '@' is then masked as a lone user name's, below: it cannot be told
# from https://TOKEN@host:8443/a@b).
_USERINFO = re.compile(r"^(\w[\w+.-]*:/{0,2}[^:/\s]*|(?://)?[^:/@\s]*):(?!//).*@")
# A user name without a password is how many pass a token (https://TOKEN@idp/keys): the
# only credential there, so masked too. Only after "scheme://" (or a bare "//", its scheme
# left out), so that an e-mail address (ops@example.com, mailto:ops@example.com) is shown
# as it is.
_LONE_USER = re.compile(r"^((?:\w[\w+.-]*:)?//)[^:/\s]+@")
# A credential in a query: libpq's password, or an API key, token or secret an IdP's key
# set URL may carry (Azure Functions' ``code``, an SAS ``sig``, S3's ``X-Amz-Signature``).
_QUERY_SECRET = re.compile(
    r"([?&](?:password|passwd|sslpassword|code|sig|[\w-]*(?:key|token|secret|signature|"
    r"credential))=)[^&#]*",
    re.IGNORECASE,
)
# Every item of a query (from its '?'), a bare one (?TOKEN) included.
_QUERY_ITEM = re.compile(r"([?&][^=&#]*)(?:=[^&#]*)?")


def hide_url_secrets(value: Any, *, every_query_value: bool = False) -> Any:
    """*value* with the credentials of a URL shown as ``***``: a password (the user name
    then kept), a user name given alone, the values of query parameters named for a
    credential (``?password=``, ``?api_key=``...) or, with *every_query_value*, of every
    query parameter (a URL the operator does not need to read back: the JWKS fetch's log);
    anything but a string unchanged. Database and JWKS URLs may carry them."""
    if not isinstance(value, str):
        return value
    shown = _LONE_USER.sub(r"\1***@", _USERINFO.sub(r"\1:***@", value))
    if every_query_value:
        path, mark, query = shown.partition("?")
        return path + _QUERY_ITEM.sub(r"\1=***", mark + query)
    return _QUERY_SECRET.sub(r"\1***", shown)
