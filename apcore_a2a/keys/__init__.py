"""The agent's own keys: signing agent cards and publishing every public key (card and
push-delivery signing) at ``/.well-known/jwks.json``."""

from apcore_a2a.keys.card_signing import (
    JWKS_PATH,
    CardSigner,
    card_signer_from_settings,
    jwks_document,
    jwks_route,
    load_key_file,
    parse_key,
)

__all__ = [
    "JWKS_PATH",
    "CardSigner",
    "card_signer_from_settings",
    "jwks_document",
    "jwks_route",
    "load_key_file",
    "parse_key",
]
