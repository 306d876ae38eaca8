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


# A URL's start: a scheme, with or without "//" (memory:user:PASSWORD@x) or with one '/'
# (memory:/user:PASSWORD@x: an empty host before it would take the rest for a path), or a
# bare "//" (its scheme left out).
_LEAD = re.compile(r"(\w[\w+.-]*:)?(//?(?!/))?")
# An authority that is a host and a port alone: a name or address, or an IPv6 literal in
# brackets (a zone's '%25' included).
_HOST_PORT = re.compile(r"(?:\[[^\]\s]*\]|[^\s:@/\[\]]*)(?::\d*)?")
# Where what a host and port alone leads to ends: a path, a query or a fragment.
_HOST_END = re.compile(r"[/?#]")
# Where a user part's authority ends once its first '@' is read: a query or a fragment.
_AUTHORITY_END = re.compile(r"[?#]")
# A credential in a query or a fragment: libpq's password, or an API key, token or secret
# an IdP's key set URL may carry (Azure Functions' ``code``, an SAS ``sig``, S3's
# ``X-Amz-Signature``), or an OAuth callback's ``#access_token=``.
_QUERY_SECRET = re.compile(
    r"([?&#](?:password|passwd|sslpassword|code|sig|[\w-]*(?:key|token|secret|signature|"
    r"credential))=)[^&#]*",
    re.IGNORECASE,
)
# Every item of a query or a fragment (from its '?' or '#'), a bare one (?TOKEN) included.
_QUERY_ITEM = re.compile(r"([?&#])(?:([^=&#]*)=)?[^&#]*")


def _user_end(rest: str) -> int:
    """Where the user part of *rest* (a URL after its scheme and "//") ends: the index of
    its '@', or -1 for none. A URL is read up to its first space (the value may be a
    sentence). What a host and port alone leads to (``host:8443/x@y``, ``[::1]/a@b``,
    ``idp?next=a@b``) is a path, query or fragment, whose '@' is no user's (a password of
    digits alone before an unencoded '/', '?' or '#' reads as such a port:
    ``u:1234/5@db``). Else the user part is read as database drivers read it: a '?' or '#'
    before its first '@' is the password's (SQLAlchemy's URL reads one there), and it
    runs to the last '@' before the query or fragment that may follow, so a password
    holding an unencoded '/', ':' or '@' is hidden whole (masking part of the host too is
    the safe side), unless the user name would then hold a '/' (the '@' is the path's)."""
    token = rest.split(maxsplit=1)[0] if rest[:1].strip() else ""
    stop = _HOST_END.search(token)
    if stop and _HOST_PORT.fullmatch(token[: stop.start()]):
        return -1
    first = token.find("@")
    if first < 0:
        return -1
    found = _AUTHORITY_END.search(token, first)
    authority = token[: found.start()] if found else token
    at = authority.rfind("@")
    slash = authority.find("/")
    if slash >= 0 and "/" in authority[:at].partition(":")[0]:  # a user name holds no '/'
        at = authority[:slash].rfind("@")
    return at


def _without_user(value: str, lead: str) -> str | None:
    """*value* (which starts with *lead*, its scheme and "//") with its user part hidden:
    a password (the user name kept, what it holds before an '@' hidden, as a user name
    given alone: Azure's ``user@server``), or, after a "//", a user name given alone (how
    many pass a token: https://TOKEN@idp/keys); ``None`` when it has neither (an e-mail
    address, ``ops@example.com``, is no user part)."""
    rest = value[len(lead) :]
    at = _user_end(rest)
    if at < 0:
        return None
    user, colon, _password = rest[:at].partition(":")
    after_slashes = lead.endswith("//")
    if not colon:
        return f"{lead}***{rest[at:]}" if after_slashes and user else None
    if after_slashes and "@" in user:
        user = "***@" + user.rpartition("@")[2]
    return f"{lead}{user}:***{rest[at:]}"


def hide_url_secrets(value: Any, *, every_query_value: bool = False) -> Any:
    """*value* with the credentials of a URL shown as ``***``: a password (the user name
    then kept), a user name given alone, the values of query or fragment parameters named
    for a credential (``?password=``, ``?api_key=``, ``#access_token=``...) or, with
    *every_query_value*, every item of its query and fragment (a URL the operator does not
    need to read back: the JWKS fetch's log); anything but a string unchanged. Database
    and JWKS URLs may carry them. A value that only starts like a URL (a sentence) is
    read up to its first space."""
    if not isinstance(value, str):
        return value
    lead = _LEAD.match(value)
    assert lead is not None  # every part optional
    shown = _without_user(value, lead[0])
    if shown is None and lead[1] and not lead[2]:  # user:PASSWORD@host: no scheme after all
        shown = _without_user(value, "")
    shown = value if shown is None else shown
    if not every_query_value:
        return _QUERY_SECRET.sub(r"\1***", shown)
    found = re.search(r"[?#]", shown)
    if found is None:
        return shown
    start = found.start()

    def hidden(item: re.Match[str]) -> str:
        if item[2] is not None:
            return f"{item[1]}{item[2]}=***"
        return item[1] if item[0] == item[1] else f"{item[1]}***"

    return shown[:start] + _QUERY_ITEM.sub(hidden, shown[start:])
