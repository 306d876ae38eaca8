"""Checks of single setting values that pydantic's types do not express: each is an
annotated type of :class:`apcore_a2a.settings.Settings`, so a bad value is refused at
start with the one line naming its source, whatever that source and the rest of the
configuration (a value used only by some task stores is checked with every store).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from pydantic import AfterValidator

_FERNET_HINT = (
    "must be a Fernet key: 32 url-safe base64-encoded bytes (make one with: python -c "
    "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
)


def _fernet_key(value: str | None) -> str | None:
    # The rule cryptography's Fernet() applies, without importing it (an optional extra).
    if value is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(value.encode())
    except (binascii.Error, ValueError):
        raise ValueError(_FERNET_HINT) from None
    if len(raw) != 32:
        raise ValueError(_FERNET_HINT)
    return value


#: ``push_encryption_key``: a Fernet key, or unset
FernetKey = Annotated[str | None, AfterValidator(_fernet_key)]
