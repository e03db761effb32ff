"""API key material: minting, parsing and verifying ``pmk_<key_id>_<secret>`` keys (no storage here).

``key_id`` is a public lookup handle (16 hex characters, never secret, safe to log); ``secret`` is 32
random bytes from :mod:`secrets` (43 URL-safe characters). Only ``sha256(secret)`` is stored.

Why a fast hash is right here: slow hashes (bcrypt, argon2) exist to make guessing *low-entropy*
passwords expensive. A 256-bit random secret cannot be guessed or brute-forced from its hash at any
speed, so a slow hash would add nothing but tens of milliseconds of CPU to every API request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field

PREFIX = "pmk_"
_KEY_ID_BYTES = 8
_SECRET_BYTES = 32
# token_hex for the id so it never contains "_" and the format splits unambiguously; the secret
# (token_urlsafe) may contain "_" and "-", which is why it comes last.
_API_KEY = re.compile(r"pmk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
# Longest possible key: bounds work done on hostile input before the regex runs.
MAX_API_KEY_CHARS = len(PREFIX) + 2 * _KEY_ID_BYTES + 1 + 43


@dataclass(frozen=True)
class NewKey:
    """A freshly minted key. ``plaintext`` is shown to the user once and never stored or logged."""

    plaintext: str = field(repr=False)
    key_id: str
    secret_hash: str


def hash_secret(secret: str) -> str:
    """The stored form of a secret: hex sha256 (see the module docstring for why not a slow hash)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def generate_api_key() -> NewKey:
    """Mint a new API key: the plaintext to hand out once, its public ``key_id`` and the hash to store."""
    key_id = secrets.token_hex(_KEY_ID_BYTES)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    return NewKey(plaintext=f"{PREFIX}{key_id}_{secret}", key_id=key_id, secret_hash=hash_secret(secret))


def looks_like_api_key(token: str | None) -> bool:
    """True when a bearer token should go to the API key store rather than the JWT validator.

    Only the prefix is checked: a malformed ``pmk_`` token must still be routed to the key store (and
    rejected there as a bad key) instead of being reported as a bad JWT.
    """
    return isinstance(token, str) and token.strip().startswith(PREFIX)


def parse_api_key(text: str | None) -> tuple[str, str] | None:
    """Split ``pmk_<key_id>_<secret>`` into ``(key_id, secret)``; ``None`` if it is not a well-formed key."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if len(text) > MAX_API_KEY_CHARS:
        return None
    match = _API_KEY.fullmatch(text)
    if match is None:
        return None
    return match.group(1), match.group(2)


def verify_secret(secret: str, stored_hash: str) -> bool:
    """True when ``secret`` hashes to ``stored_hash``; the comparison is constant-time."""
    if not isinstance(secret, str) or not isinstance(stored_hash, str):
        return False
    # compare_digest on ASCII strings; a non-ASCII stored hash can only be corrupt data.
    if not stored_hash.isascii():
        return False
    return hmac.compare_digest(hash_secret(secret), stored_hash.lower())
