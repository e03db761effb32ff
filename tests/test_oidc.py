"""OidcValidator against a real issuer over HTTP, with real keys and signatures."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from shared.identity import AuthError, IdentityProviderUnavailable, OidcValidator
from tests import oidc_issuer as issuer_kit
from tests.oidc_issuer import (
    DEFAULT_AUDIENCE,
    OidcTestIssuer,
    b64url,
    compact,
    generate_signing_key,
    sign_rs256_unchecked,
)

oidc_issuer = issuer_kit.oidc_issuer  # the pytest fixture, made visible to this module


class SteppingClock:
    """A monotonic clock the test advances by hand, so refresh intervals are tested without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, secs: float) -> None:
        self.now += secs


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock()


@pytest.fixture
def validator(oidc_issuer: OidcTestIssuer, clock: SteppingClock) -> OidcValidator:
    return OidcValidator(oidc_issuer.issuer, None, DEFAULT_AUDIENCE, clock=clock, timeout=5)


def _rejects(validator: OidcValidator, token: str | None, reason_part: str) -> AuthError:
    """Assert the token is refused with a reason containing ``reason_part`` that does not echo it."""
    with pytest.raises(AuthError) as info:
        validator.validate(token)
    err = info.value
    assert reason_part in err.reason
    assert str(err) == err.reason
    if token and len(token) > 8:
        assert token not in str(err)
        assert token[:20] not in str(err)
    return err


# --- valid tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize(("kty", "alg"), [("RSA", "RS256"), ("EC", "ES256"), ("RSA", "PS256")])
def test_valid_token_maps_to_principal(oidc_issuer: OidcTestIssuer, validator: OidcValidator,
                                       kty: str, alg: str) -> None:
    token = oidc_issuer.mint({"sub": "bob", "scope": "openid memory:write", "projects": ["alpha"],
                              "roles": ["sre"], "preferred_username": "Bob"},
                             key=oidc_issuer.key(kty), alg=alg)
    principal = validator.validate(token)
    assert principal.subject == "bob"
    assert principal.kind == "user"
    assert principal.name == "Bob"
    assert principal.capabilities == {"memory:write", "memory:read"}
    assert principal.projects == {"alpha"}
    assert principal.roles == {"sre"}
    assert principal.may_see("alpha") and not principal.may_see("beta")


def test_discovery_is_used_once_and_keys_are_cached(oidc_issuer: OidcTestIssuer,
                                                    validator: OidcValidator) -> None:
    for _ in range(5):
        validator.validate(oidc_issuer.mint({"scope": "memory:read"}))
    assert oidc_issuer.discovery_fetches == 1
    assert oidc_issuer.jwks_fetches == 1
    assert validator.key_count() == 2


def test_explicit_jwks_url_skips_discovery(oidc_issuer: OidcTestIssuer) -> None:
    validator = OidcValidator(None, oidc_issuer.jwks_url, None)
    principal = validator.validate(oidc_issuer.mint({"aud": "anyone", "iss": "whoever"}))
    assert principal.subject == "alice"
    assert oidc_issuer.discovery_fetches == 0


def test_audience_list_containing_ours_passes(oidc_issuer: OidcTestIssuer,
                                              validator: OidcValidator) -> None:
    token = oidc_issuer.mint({"aud": ["other-app", DEFAULT_AUDIENCE]})
    assert validator.validate(token).subject == "alice"


def test_expiry_within_leeway_passes(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    token = oidc_issuer.mint({"exp": int(time.time()) - 5})
    assert validator.validate(token).subject == "alice"


def test_role_projects_widen_scope(oidc_issuer: OidcTestIssuer, clock: SteppingClock) -> None:
    mapping = {"sre": {"infra", "ci"}}
    validator = OidcValidator(oidc_issuer.issuer, None, DEFAULT_AUDIENCE, clock=clock,
                              role_projects=lambda: mapping)
    token = oidc_issuer.mint({"scope": "memory:read", "groups": ["sre"], "projects": ["alpha"]})
    assert validator.validate(token).projects == {"alpha", "infra", "ci"}
    mapping["sre"] = {"infra"}  # the callable is read per validation
    assert validator.validate(token).projects == {"alpha", "infra"}


# --- rejected tokens ----------------------------------------------------------------------------


def test_alg_none_is_rejected(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    kid = oidc_issuer.key("RSA").kid
    claims = oidc_issuer.claims({"scope": "memory:admin"})
    _rejects(validator, compact({"alg": "none", "kid": kid}, claims), "algorithm is not allowed")
    _rejects(validator, compact({"alg": "none", "kid": kid}, claims, b"sig"), "algorithm is not allowed")
    _rejects(validator, compact({"kid": kid}, claims, b"sig"), "not a well-formed JWT")  # no alg at all


def test_hs256_signed_with_public_key_bytes_is_rejected(oidc_issuer: OidcTestIssuer,
                                                        validator: OidcValidator) -> None:
    key = oidc_issuer.key("RSA")
    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    claims = oidc_issuer.claims({"scope": "memory:admin"})
    signing_input = compact(header, claims).rsplit(".", 1)[0]
    for secret in (key.as_pem(private=False), json.dumps(key.as_dict(private=False)).encode()):
        sig = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        _rejects(validator, f"{signing_input}.{b64url(sig)}", "algorithm is not allowed")


def test_expired_token(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    _rejects(validator, oidc_issuer.mint({"exp": int(time.time()) - 120}), "expired")


def test_not_yet_valid_token(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    _rejects(validator, oidc_issuer.mint({"nbf": int(time.time()) + 600}), "not valid yet")
    _rejects(validator, oidc_issuer.mint({"iat": int(time.time()) + 600}), "issued in the future")


def test_wrong_issuer(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    _rejects(validator, oidc_issuer.mint({"iss": "https://evil.example"}), "issuer is not accepted")
    _rejects(validator, oidc_issuer.mint(omit=["iss"]), "missing a required claim (iss)")


def test_wrong_audience(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    _rejects(validator, oidc_issuer.mint({"aud": "other-app"}), "audience is not accepted")
    _rejects(validator, oidc_issuer.mint({"aud": ["a", "b"]}), "audience is not accepted")
    _rejects(validator, oidc_issuer.mint(omit=["aud"]), "missing a required claim (aud)")


def test_missing_exp_or_sub(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    _rejects(validator, oidc_issuer.mint(omit=["exp"]), "missing a required claim (exp)")
    _rejects(validator, oidc_issuer.mint(omit=["sub"]), "missing a required claim (sub)")
    _rejects(validator, oidc_issuer.mint({"exp": "tomorrow"}), "claim 'exp' is invalid")


def test_bad_claim_shapes_are_auth_errors(oidc_issuer: OidcTestIssuer,
                                          validator: OidcValidator) -> None:
    _rejects(validator, oidc_issuer.mint({"projects": {"a": 1}}), "claim 'projects'")
    _rejects(validator, oidc_issuer.mint({"roles": [1, 2]}), "claim 'roles'")


def test_unknown_kid(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    validator.validate(oidc_issuer.mint())
    _rejects(validator, oidc_issuer.mint(kid="no-such-key"), "unknown key")


def test_tampered_payload_keeps_original_signature(oidc_issuer: OidcTestIssuer,
                                                   validator: OidcValidator) -> None:
    token = oidc_issuer.mint({"scope": "memory:read", "projects": ["alpha"]})
    header_seg, _, sig_seg = token.split(".")
    forged_claims = oidc_issuer.claims({"scope": "memory:admin", "projects": ["alpha", "secret"]})
    payload_seg = b64url(json.dumps(forged_claims).encode())
    _rejects(validator, f"{header_seg}.{payload_seg}.{sig_seg}", "signature is invalid")


def test_signed_by_another_key_with_known_kid(oidc_issuer: OidcTestIssuer,
                                              validator: OidcValidator) -> None:
    for kty in ("RSA", "EC"):
        stranger = generate_signing_key(kty)  # type: ignore[arg-type]
        token = oidc_issuer.mint(key=stranger, kid=str(oidc_issuer.key(kty).kid))
        _rejects(validator, token, "signature is invalid")


def test_embedded_jwk_header_is_not_trusted(oidc_issuer: OidcTestIssuer,
                                            validator: OidcValidator) -> None:
    stranger = generate_signing_key("RSA")
    token = oidc_issuer.mint(key=stranger, kid=str(oidc_issuer.key("RSA").kid),
                             header={"jwk": stranger.as_dict(private=False), "jku": "http://127.0.0.1:1/x"})
    with pytest.raises(AuthError):
        validator.validate(token)


def test_unknown_header_parameters_are_ignored_unless_critical(oidc_issuer: OidcTestIssuer,
                                                               validator: OidcValidator) -> None:
    key = oidc_issuer.key("RSA")
    assert validator.validate(oidc_issuer.mint(header={"typ": "at+jwt", "nonce": "n-1"})).subject == "alice"
    plain = sign_rs256_unchecked({"alg": "RS256", "kid": key.kid}, oidc_issuer.claims(), key)
    assert validator.validate(plain).subject == "alice"  # the hand signer itself produces valid tokens
    critical = sign_rs256_unchecked({"alg": "RS256", "kid": key.kid, "crit": ["x-policy"], "x-policy": 1},
                                    oidc_issuer.claims(), key)
    _rejects(validator, critical, "could not be verified")


def test_algorithm_and_key_type_must_match(oidc_issuer: OidcTestIssuer,
                                           validator: OidcValidator) -> None:
    rsa_kid = str(oidc_issuer.key("RSA").kid)
    token = oidc_issuer.mint(key=oidc_issuer.key("EC"), kid=rsa_kid)  # ES256 claiming the RSA key
    _rejects(validator, token, "could not be verified")


def test_token_without_kid(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    # With several published keys a kid-less token cannot name its key: refused, never tried on each key.
    _rejects(validator, oidc_issuer.mint(header={"kid": None}), "could not be verified")
    with OidcTestIssuer(key_types=("RSA",)) as single:
        only_key = OidcValidator(single.issuer, None, DEFAULT_AUDIENCE)
        assert only_key.validate(single.mint(header={"kid": None})).subject == "alice"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (None, "missing"),
        ("", "missing"),
        ("   ", "missing"),
        ("garbage", "not a well-formed JWT"),
        ("a.b", "not a well-formed JWT"),
        ("a.b.c.d.e", "not a well-formed JWT"),
        ("!!!.???.***", "not a well-formed JWT"),
        ("eyJhbGciOiJSUzI1NiJ9.%%%.abc", "not a well-formed JWT"),
        ("Zm9v.YmFy.YmF6", "not a well-formed JWT"),  # segments decode, but the header is not JSON
        ("tökén.ünïcødé.ß", "not a well-formed JWT"),
        ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiLwn5iAIn0.\u200b", "not a well-formed JWT"),
        ("x" * 100_000, "too large"),
        ("eyJhbGciOiJSUzI1NiJ9." + "A" * 100_000 + ".abc", "too large"),
    ],
)
def test_malformed_tokens(validator: OidcValidator, token: str | None, reason: str) -> None:
    _rejects(validator, token, reason)


def test_header_that_is_valid_json_but_not_an_object(validator: OidcValidator) -> None:
    for header in (b"[]", b'"RS256"', b"null", b'{"alg": ["RS256"]}', b'{"alg": "RS256", "kid": 5}'):
        token = f"{b64url(header)}.{b64url(b'{}')}.{b64url(b'sig')}"
        with pytest.raises(AuthError):
            validator.validate(token)


# --- key refresh, rotation and rate limiting ------------------------------------------------------


def test_rotation_is_picked_up_through_unknown_kid(oidc_issuer: OidcTestIssuer,
                                                   validator: OidcValidator, clock: SteppingClock) -> None:
    old_token = oidc_issuer.mint()
    validator.validate(old_token)
    assert oidc_issuer.jwks_fetches == 1

    new_key = oidc_issuer.rotate("RSA")
    clock.advance(validator.min_refetch_secs)
    assert validator.validate(oidc_issuer.mint(key=new_key)).subject == "alice"
    assert oidc_issuer.jwks_fetches == 2
    # The retired key is gone from the cache, so its tokens no longer verify.
    _rejects(validator, old_token, "unknown key")


def test_bad_kid_flood_fetches_at_most_once_per_interval(oidc_issuer: OidcTestIssuer,
                                                         validator: OidcValidator,
                                                         clock: SteppingClock) -> None:
    validator.validate(oidc_issuer.mint())
    assert oidc_issuer.jwks_fetches == 1

    def flood(count: int) -> None:
        for _ in range(count):
            with pytest.raises(AuthError):
                validator.validate(oidc_issuer.mint(kid=uuid.uuid4().hex))

    flood(100)
    assert oidc_issuer.jwks_fetches == 1  # the initial fetch was less than min_refetch_secs ago

    clock.advance(validator.min_refetch_secs)
    flood(100)
    assert oidc_issuer.jwks_fetches == 2  # one refetch for the whole second wave

    clock.advance(validator.min_refetch_secs / 2)
    _run_in_threads(8, lambda: flood(10))
    assert oidc_issuer.jwks_fetches == 2


def test_keys_refresh_on_schedule(oidc_issuer: OidcTestIssuer, validator: OidcValidator,
                                  clock: SteppingClock) -> None:
    validator.validate(oidc_issuer.mint())
    clock.advance(validator.refresh_secs - 1)
    validator.validate(oidc_issuer.mint())
    assert oidc_issuer.jwks_fetches == 1
    clock.advance(1)
    validator.validate(oidc_issuer.mint())
    assert oidc_issuer.jwks_fetches == 2


def test_cached_keys_survive_an_issuer_outage(oidc_issuer: OidcTestIssuer, validator: OidcValidator,
                                              clock: SteppingClock) -> None:
    validator.validate(oidc_issuer.mint())
    oidc_issuer.jwks_status = 500
    clock.advance(validator.refresh_secs)
    assert validator.validate(oidc_issuer.mint()).subject == "alice"  # refresh failed, cache served
    assert oidc_issuer.jwks_fetches == 2
    validator.validate(oidc_issuer.mint())
    assert oidc_issuer.jwks_fetches == 2  # and the failed refresh is not retried on every request
    oidc_issuer.jwks_status = None
    clock.advance(validator.min_refetch_secs)
    validator.validate(oidc_issuer.mint())
    assert oidc_issuer.jwks_fetches == 3


def test_issuer_down_at_start_is_a_503_and_is_paced(oidc_issuer: OidcTestIssuer,
                                                    validator: OidcValidator, clock: SteppingClock) -> None:
    oidc_issuer.jwks_status = 503
    token = oidc_issuer.mint()
    for _ in range(5):
        with pytest.raises(IdentityProviderUnavailable) as info:
            validator.validate(token)
        assert info.value.status == 503
    assert oidc_issuer.jwks_fetches == 1
    oidc_issuer.jwks_status = None
    clock.advance(validator.min_refetch_secs)
    assert validator.validate(token).subject == "alice"


def test_unreachable_issuer_is_a_clear_error() -> None:
    with OidcTestIssuer(key_types=("RSA",)) as issuer:
        token = issuer.mint()
        url = issuer.issuer
    validator = OidcValidator(url, None, DEFAULT_AUDIENCE, timeout=2)
    with pytest.raises(IdentityProviderUnavailable, match="unreachable"):
        validator.validate(token)


def test_discovery_naming_another_issuer_is_refused(oidc_issuer: OidcTestIssuer) -> None:
    other_name = oidc_issuer.issuer.replace("127.0.0.1", "localhost")
    validator = OidcValidator(other_name, None, DEFAULT_AUDIENCE, timeout=2)
    with pytest.raises(IdentityProviderUnavailable, match="different issuer"):
        validator.validate(oidc_issuer.mint({"iss": other_name}))


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{" + b" " * (1024 * 1024), "oversized"),
        (b"<html>not json</html>", "invalid document"),
        (b"[1, 2]", "invalid document"),
        (b"\xff\xfe\x00", "invalid document"),
        (b'{"keys": "none"}', "invalid JWKS"),
    ],
)
def test_bad_jwks_documents_are_clear_errors(oidc_issuer: OidcTestIssuer, validator: OidcValidator,
                                             body: bytes, reason: str) -> None:
    oidc_issuer.jwks_body = body
    with pytest.raises(IdentityProviderUnavailable, match=reason):
        validator.validate(oidc_issuer.mint())


def test_unusable_keys_in_jwks_are_skipped(oidc_issuer: OidcTestIssuer, validator: OidcValidator) -> None:
    good = oidc_issuer.jwks()["keys"]
    junk = [{"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"}, {"kty": "oct", "k": "c2VjcmV0"},
            {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {**good[0], "kid": "enc-key", "use": "enc"}, "not-a-key"]
    oidc_issuer.jwks_body = json.dumps({"keys": junk + good}).encode()
    assert validator.validate(oidc_issuer.mint()).subject == "alice"
    assert validator.key_count() == len(good)
    # An HS256 token naming the published oct key must not verify against it.
    _rejects(validator, compact({"alg": "HS256", "kid": "broken"}, oidc_issuer.claims(), b"x"),
             "algorithm is not allowed")


def test_validator_needs_issuer_or_jwks_url() -> None:
    with pytest.raises(ValueError, match="MEM_OIDC_ISSUER"):
        OidcValidator(None, None, None)


def test_concurrent_cold_start_fetches_once(oidc_issuer: OidcTestIssuer,
                                            validator: OidcValidator) -> None:
    tokens = [oidc_issuer.mint({"sub": f"user-{i}"}, key=oidc_issuer.key("RSA" if i % 2 else "EC"))
              for i in range(16)]
    results: list[str] = []
    lock = threading.Lock()

    def check(token: str) -> None:
        subject = validator.validate(token).subject
        with lock:
            results.append(subject)

    threads = [threading.Thread(target=check, args=(t,)) for t in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results) == sorted(f"user-{i}" for i in range(16))
    assert oidc_issuer.jwks_fetches == 1


def _run_in_threads(count: int, target: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
