"""Private keys at rest: sealed with Fernet when ``push_encryption_key`` is set.

The push signing key and the card signing key are stored in the agent's database as PEM;
with an encryption key (``A2A_PUSH_ENCRYPTION_KEY``, or a file named by
``A2A_PUSH_ENCRYPTION_KEY_FILE``) they are stored as ``fernet:<token>`` instead. One place
for both so that a key sealed by either feature is read back the same way, and so that a
key read in the clear is said at start, in the log, once per key.
"""

from __future__ import annotations

import logging

__all__ = ["seal", "unseal"]

logger = logging.getLogger("apcore_a2a.keys")

_FERNET_PREFIX = "fernet:"


def seal(pem: str, encryption_key: str | None) -> str:
    """*pem* as stored: sealed when *encryption_key* is set, else as is."""
    if not encryption_key:
        return pem
    from cryptography.fernet import Fernet

    return _FERNET_PREFIX + Fernet(encryption_key.encode()).encrypt(pem.encode()).decode()


def unseal(data: str, encryption_key: str | None, what: str) -> str:
    """The PEM of a stored key; *what* names it in errors (``"push signing key"``)."""
    if not data.startswith(_FERNET_PREFIX):
        if encryption_key:
            fix = "it was stored before push_encryption_key was set; rotate it"
        else:
            fix = "set A2A_PUSH_ENCRYPTION_KEY (or A2A_PUSH_ENCRYPTION_KEY_FILE) to seal it"
        logger.warning(
            "the %s is stored in the clear in the task database (readable by anyone who "
            "can read the database): %s",
            what,
            fix,
        )
        return data
    if not encryption_key:
        raise RuntimeError(f"the stored {what} is encrypted; set push_encryption_key to read it")
    from cryptography.fernet import Fernet, InvalidToken

    try:
        return Fernet(encryption_key.encode()).decrypt(data[len(_FERNET_PREFIX) :]).decode()
    except InvalidToken:
        raise RuntimeError(f"push_encryption_key does not decrypt the stored {what}") from None
