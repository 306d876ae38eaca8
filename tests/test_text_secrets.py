"""``_text.hide_url_secrets``, the one masking of URLs (settings shown and refused, the
JWKS fetch's log, a proxy named in a refusal): for a table of URLs, every credential
hidden and nothing else changed. A user part is the authority's (before its first ``/``,
``?`` or ``#``), read leniently as database drivers read it (a password holding an
unencoded ``/`` or ``@``), but an ``@`` after a ``host[:port]/`` is the path's."""

from __future__ import annotations

import pytest

from apcore_a2a._text import hide_url_secrets

#: (value, as shown, as the JWKS log shows it: every query and fragment value hidden)
TABLE = [
    # userinfo forms
    ("https://u:pw@h/x", "https://u:***@h/x", None),
    ("postgresql://app:s3cret@db:5432/tasks", "postgresql://app:***@db:5432/tasks", None),
    ("https://TOKEN@idp/keys", "https://***@idp/keys", None),
    ("https://u:@h/", "https://u:***@h/", None),
    ("postgresql://u:pa/ss@db/x", "postgresql://u:***@db/x", None),  # an unencoded '/'
    ("postgresql://u:p@ss/w@db/x", "postgresql://u:***@db/x", None),  # ... and '@'
    ("postgresql://u:p:w@db/x", "postgresql://u:***@db/x", None),
    ("https://client@tenant:pw@idp/j", "https://***@tenant:***@idp/j", None),  # Azure's
    # a '?' or '#' before the first '@' is the password's, as SQLAlchemy's URL reads it
    ("postgresql://u:p?ss@db/x", "postgresql://u:***@db/x", None),
    (
        "postgresql://u:p#ss@db/x?ssl=1",
        "postgresql://u:***@db/x?ssl=1",
        "postgresql://u:***@db/x?ssl=***",
    ),
    ("postgresql://u:p?s/s@db/x", "postgresql://u:***@db/x", None),
    ("https://u:p@h?next=a@b", "https://u:***@h?next=a@b", "https://u:***@h?next=***"),
    ("https://u:p@h/?next=a@b", "https://u:***@h/?next=a@b", "https://u:***@h/?next=***"),
    ("https://u:p@h#a@b", "https://u:***@h#a@b", "https://u:***@h#***"),
    # paths, queries and fragments holding an '@'
    ("https://host:8443/x@y", None, None),
    ("https://host/x@y", None, None),
    ("https://host/a:b@c", None, None),
    ("https://host:8443/x@y:z@w", None, None),
    ("https://host?a=b@c", None, "https://host?a=***"),
    ("https://host#x@y", None, "https://host#***"),
    ("https://host:8443?a=b@c", None, "https://host:8443?a=***"),
    ("https://[::1]:8443#x@y", None, "https://[::1]:8443#***"),
    # IPv6 literals
    ("https://[::1]:8443/a@b", None, None),
    ("https://[2001:db8::1]/a@b", None, None),
    ("https://u:p@[::1]:5/x", "https://u:***@[::1]:5/x", None),
    ("https://TOKEN@[fe80::1%25eth0]:8443/k", "https://***@[fe80::1%25eth0]:8443/k", None),
    # query tokens
    (
        "https://idp/j?api_key=k&t=1",
        "https://idp/j?api_key=***&t=1",
        "https://idp/j?api_key=***&t=***",
    ),
    (
        "postgresql://db/x?password=p&ssl=1",
        "postgresql://db/x?password=***&ssl=1",
        "postgresql://db/x?password=***&ssl=***",
    ),
    ("https://idp/j?SECRETTOKEN", None, "https://idp/j?***"),
    ("https://idp/j?a&b=1", None, "https://idp/j?***&b=***"),
    # fragments
    (
        "https://app/cb#access_token=abc&state=x",
        "https://app/cb#access_token=***&state=x",
        "https://app/cb#access_token=***&state=***",
    ),
    (
        "https://app/cb?x=1#id_token=abc",
        "https://app/cb?x=1#id_token=***",
        "https://app/cb?x=***#id_token=***",
    ),
    ("https://app/cb#SECRET", None, "https://app/cb#***"),
    # no scheme, or one without '//'
    ("//u:pw@db/x", "//u:***@db/x", None),
    ("//TOKEN@db/x", "//***@db/x", None),
    ("memory:user:pw@x", "memory:user:***@x", None),
    ("memory:/user:pw@x", "memory:/user:***@x", None),
    ("sqlite:///data/a@b.db", None, None),
    ("user:pw@host", "user:***@host", None),
    ("host:8443/x@y", None, None),
    ("db.example:5432", None, None),
    # not URLs: sentences and e-mail addresses
    ("ops@example.com", None, None),
    ("x: could not connect to u@h", None, None),
    ("see memory:// and user@host", None, None),
    ("", None, None),
]


@pytest.mark.parametrize(("value", "shown", "logged"), TABLE, ids=[t[0] or "empty" for t in TABLE])
def test_a_url_is_shown_without_its_credentials(
    value: str, shown: str | None, logged: str | None
) -> None:
    shown = value if shown is None else shown
    assert hide_url_secrets(value) == shown
    assert hide_url_secrets(value, every_query_value=True) == (shown if logged is None else logged)


@pytest.mark.parametrize("value", [None, 8443, ["https://u:pw@h"]])
def test_anything_but_a_string_is_returned_as_it_is(value: object) -> None:
    assert hide_url_secrets(value) is value
