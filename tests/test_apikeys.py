"""API key material: format, parsing, hashing, constant-time verification and routing."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from shared.identity import generate_api_key, hash_secret, looks_like_api_key, parse_api_key, verify_secret
from shared.identity.apikeys import MAX_API_KEY_CHARS


def test_generated_key_format_and_roundtrip() -> None:
    key = generate_api_key()
    assert re.fullmatch(r"pmk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}", key.plaintext)
    assert len(key.plaintext) == MAX_API_KEY_CHARS
    parsed = parse_api_key(key.plaintext)
    assert parsed is not None
    key_id, secret = parsed
    assert key_id == key.key_id
    assert key.secret_hash == hashlib.sha256(secret.encode()).hexdigest() == hash_secret(secret)
    assert verify_secret(secret, key.secret_hash)
    assert looks_like_api_key(key.plaintext)


def test_keys_are_unique() -> None:
    keys = [generate_api_key() for _ in range(200)]
    assert len({k.key_id for k in keys}) == 200
    assert len({k.plaintext for k in keys}) == 200


def test_plaintext_is_not_in_repr() -> None:
    key = generate_api_key()
    assert key.plaintext not in repr(key)
    assert key.key_id in repr(key)


def test_wrong_secret_or_hash_fails() -> None:
    a, b = generate_api_key(), generate_api_key()
    _, secret_a = parse_api_key(a.plaintext) or ("", "")
    assert not verify_secret(secret_a, b.secret_hash)
    assert not verify_secret(secret_a[:-1], a.secret_hash)
    assert verify_secret(secret_a, a.secret_hash.upper())  # hex case does not matter
    assert not verify_secret(secret_a, "")
    assert not verify_secret(secret_a, "zz" * 32)
    assert not verify_secret(secret_a, "ü" * 64)
    assert not verify_secret(None, a.secret_hash)  # type: ignore[arg-type]


def test_secret_with_underscores_parses() -> None:
    text = "pmk_0123456789abcdef_" + "a_b-" * 10 + "xyz"
    assert parse_api_key(text) == ("0123456789abcdef", "a_b-" * 10 + "xyz")


def test_parse_rejects_malformed_keys() -> None:
    good = generate_api_key().plaintext
    for bad in [
        None, "", "pmk_", "pmk__", good[:-1], good + "A", good.replace("pmk_", "pmx_"),
        good.upper(), "pmk_0123456789ABCDEF_" + "a" * 43, "pmk_0123456789abcde_" + "a" * 44,
        "pmk_0123456789abcdef_" + "a" * 42 + "=", "pmk_0123456789abcdef_" + "a" * 42 + "é",
        "pmk_" + "a" * 100_000, "x" * 1_000_000, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
    ]:
        assert parse_api_key(bad) is None, bad if bad is None else bad[:40]


def test_routing_between_key_store_and_jwt_validator() -> None:
    assert looks_like_api_key("pmk_garbage")  # still a key: the key store rejects it with a key error
    assert looks_like_api_key("  " + generate_api_key().plaintext)
    assert not looks_like_api_key("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
    assert not looks_like_api_key("")
    assert not looks_like_api_key(None)


@given(st.text(max_size=200))
def test_parse_never_crashes(text: str) -> None:
    parsed = parse_api_key(text)
    if parsed is not None:
        key_id, secret = parsed
        assert text.strip() == f"pmk_{key_id}_{secret}"


@given(st.text(max_size=100), st.text(max_size=100))
def test_verify_never_crashes(secret: str, stored: str) -> None:
    assert verify_secret(secret, stored) == (stored.lower() == hash_secret(secret))
