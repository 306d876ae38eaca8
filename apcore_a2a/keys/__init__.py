"""The agent's own keys: signing agent cards and publishing the public keys.

* :class:`CardSigner` signs the public and extended cards (A2A 1.0 ``signatures``) with
  the a2a-sdk's signer; :func:`card_signer_from_settings` builds it from settings.
* :func:`jwks_route` serves ``/.well-known/jwks.json`` with every public key (card and
  push-delivery signing) in one document.
* :mod:`apcore_a2a.keys.material` reads a key file (PEM or JWK) or keeps a generated key.
"""

from apcore_a2a.keys.card_signing import JWKS_PATH, CardSigner, card_signer_from_settings
from apcore_a2a.keys.jwks import jwks_document, jwks_route
from apcore_a2a.keys.material import load_key_file, parse_key

__all__ = [
    "JWKS_PATH",
    "CardSigner",
    "card_signer_from_settings",
    "jwks_document",
    "jwks_route",
    "load_key_file",
    "parse_key",
]
