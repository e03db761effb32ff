"""Validate OIDC access tokens (JWTs) against the issuer's published keys (JWKS).

Signature, algorithm and claims checks are joserfc's; this module adds what joserfc leaves to the
caller: finding the JWKS (OIDC discovery), caching it, refreshing it on a schedule and on an unknown
``kid`` without letting a flood of bad tokens hammer the issuer, and turning every failure into an
:class:`AuthError` whose message is safe to return to the client (it never contains the token).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests
from joserfc import jws, jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import ECKey, Key, KeySet, RSAKey

from shared.identity.principal import ClaimsError, Principal, principal_from_claims

log = logging.getLogger(__name__)

# Asymmetric only: "none" and HS* are never accepted (an HS* token "signed" with the public key's bytes
# is the classic key-confusion forgery). joserfc enforces this list; we also pre-check it to give a clear
# message.
ALLOWED_ALGORITHMS: tuple[str, ...] = ("RS256", "ES256", "PS256")

# RFC 7515 section 4: header parameters we do not understand are ignored unless listed in "crit" (which
# joserfc still enforces). joserfc's default strict mode would reject real IdP tokens carrying e.g. an
# Azure "nonce" header, so it is relaxed; the algorithm allow-list rides on the same registry.
_JWS_REGISTRY = jws.JWSRegistry(algorithms=list(ALLOWED_ALGORITHMS), strict_check_header=False)

# Real access tokens are 1-4 KB; anything far larger is garbage or an attack, rejected before parsing.
MAX_TOKEN_CHARS = 16 * 1024
# A JWKS or discovery document is a few KB; cap the download so a hostile endpoint cannot exhaust memory.
MAX_DOCUMENT_BYTES = 512 * 1024
# Compact JWS: three base64url segments.
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


class AuthError(Exception):
    """Authentication failed. ``reason`` (also the message) is safe to show to the caller."""

    #: HTTP status the API should answer with.
    status: int = 401

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class IdentityProviderUnavailable(AuthError):
    """The issuer's discovery document or JWKS could not be fetched (and no cached keys apply)."""

    status = 503


def _fetch_json(session: requests.Session, url: str, timeout: float) -> dict[str, Any]:
    """GET ``url`` and return its JSON object, reading at most :data:`MAX_DOCUMENT_BYTES`."""
    body = bytearray()
    try:
        with session.get(url, timeout=timeout, stream=True, headers={"Accept": "application/json"}) as resp:
            resp.raise_for_status()
            for chunk in resp.iter_content(chunk_size=16 * 1024):
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise IdentityProviderUnavailable("identity provider returned an oversized document")
    except requests.RequestException as exc:
        log.warning("oidc fetch failed", extra={"url": url, "error": type(exc).__name__})
        raise IdentityProviderUnavailable("identity provider is unreachable") from exc
    try:
        data = json.loads(bytes(body))
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        data = None
    if not isinstance(data, dict):
        log.warning("oidc fetch returned a non-object document", extra={"url": url})
        raise IdentityProviderUnavailable("identity provider returned an invalid document")
    return data


def _import_signing_keys(jwks: Mapping[str, Any]) -> KeySet:
    """The usable signature keys of a JWKS document; keys we cannot use are skipped, not fatal.

    Done key by key (rather than ``KeySet.import_key_set``) so one malformed or exotic key published
    next to good ones does not take the whole set down.
    """
    raw_keys = jwks.get("keys")
    if not isinstance(raw_keys, list):
        raise IdentityProviderUnavailable("identity provider returned an invalid JWKS")
    keys: list[Key] = []
    for raw in raw_keys[:100]:
        if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":
            continue
        kty = raw.get("kty")
        try:
            if kty == "RSA":
                keys.append(RSAKey.import_key(raw))
            elif kty == "EC":
                keys.append(ECKey.import_key(raw))
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            log.warning("skipping unusable JWKS key", extra={"kid": str(raw.get("kid"))[:64],
                                                            "error": type(exc).__name__})
    return KeySet(keys)


class OidcValidator:
    """Validates bearer JWTs for one issuer and maps them to a :class:`Principal`. Thread-safe.

    ``issuer``: expected ``iss`` (exact, except that a trailing slash is optional since IdPs differ on
    it) and, without ``jwks_url``, the base of OIDC discovery; with ``issuer=None`` ``iss`` is not
    checked. ``jwks_url``: explicit JWKS location (skips discovery). ``audience``: expected ``aud``
    (unchecked when ``None``). ``exp`` and ``sub`` are always required; ``leeway`` seconds of clock
    skew are allowed on ``exp``/``nbf``/``iat``. Keys are cached and refetched every ``refresh_secs``, and on a token whose ``kid``
    is unknown -- but such a refetch happens at most once per ``min_refetch_secs``. If a scheduled
    refresh fails, the cached keys keep serving (the issuer being briefly down must not log everyone
    out). ``role_projects`` is passed to :func:`principal_from_claims`; it may be a callable so the
    lead can read the current mapping from the database per request.
    """

    def __init__(
        self,
        issuer: str | None,
        jwks_url: str | None,
        audience: str | None,
        *,
        leeway: int = 30,
        refresh_secs: float = 3600,
        min_refetch_secs: float = 30,
        timeout: float = 5.0,
        role_projects: Mapping[str, set[str]] | Callable[[], Mapping[str, set[str]]] | None = None,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not issuer and not jwks_url:
            raise ValueError("OIDC needs an issuer (MEM_OIDC_ISSUER) or a JWKS URL (MEM_OIDC_JWKS_URL)")
        self.issuer = issuer.rstrip("/") if issuer else None
        self._issuer_claim = issuer  # "iss" is compared case-sensitively, up to a trailing slash
        self.audience = audience
        self.leeway = leeway
        self.refresh_secs = refresh_secs
        self.min_refetch_secs = min_refetch_secs
        self.timeout = timeout
        self._role_projects = role_projects
        self._session = session or requests.Session()
        self._clock = clock
        self._jwks_url = jwks_url
        self._keys: KeySet | None = None
        self._fetched_at: float | None = None  # clock() of the last fetch attempt, success or not
        self._loaded_at: float | None = None  # clock() of the last successful fetch
        # One lock for fetching: concurrent requests that all need keys wait for a single fetch
        # instead of each hitting the issuer. It also serialises use of the requests Session, which
        # is not documented as thread-safe.
        self._lock = threading.Lock()

    # --- keys -------------------------------------------------------------------------------------

    def _resolve_jwks_url(self) -> str:
        if self._jwks_url:
            return self._jwks_url
        assert self.issuer is not None  # __init__ guarantees one of the two
        doc = _fetch_json(self._session, f"{self.issuer}/.well-known/openid-configuration", self.timeout)
        # OIDC Discovery 1.0 section 4.3: the document's issuer must be the one we asked for.
        if str(doc.get("issuer", "")).rstrip("/") != self.issuer:
            raise IdentityProviderUnavailable("identity provider discovery names a different issuer")
        uri = doc.get("jwks_uri")
        if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
            raise IdentityProviderUnavailable("identity provider discovery has no jwks_uri")
        self._jwks_url = uri
        return uri

    def _fetch_locked(self) -> None:
        """Fetch the JWKS now (caller holds the lock). Keeps the old keys if the fetch fails."""
        self._fetched_at = self._clock()
        try:
            keys = _import_signing_keys(_fetch_json(self._session, self._resolve_jwks_url(), self.timeout))
        except IdentityProviderUnavailable:
            if self._keys is None:
                raise
            log.warning("JWKS refresh failed; serving cached keys")
            return
        self._keys = keys
        self._loaded_at = self._fetched_at
        count = len(list(keys))
        if count:
            log.info("JWKS loaded", extra={"keys": count})
        else:
            log.warning("JWKS has no usable RSA/EC signing keys; every token will be refused")

    def _current_keys(self) -> KeySet:
        """The cached keys, fetching first if there are none or they are older than ``refresh_secs``."""
        with self._lock:
            now = self._clock()
            stale = self._loaded_at is None or now - self._loaded_at >= self.refresh_secs
            # A failed attempt also counts for pacing, so a down issuer is retried at most once per
            # min_refetch_secs rather than on every request.
            recently_tried = self._fetched_at is not None and now - self._fetched_at < self.min_refetch_secs
            if self._keys is None and recently_tried:
                raise IdentityProviderUnavailable("identity provider is unreachable")
            if stale and not (self._keys is not None and recently_tried):
                self._fetch_locked()
            assert self._keys is not None
            return self._keys

    def _keys_with_kid(self, kid: str | None) -> KeySet:
        """The key set, refetched (rate-limited) when it does not contain ``kid``."""
        keys = self._current_keys()
        if kid is None or any(k.kid == kid for k in keys):
            return keys
        with self._lock:
            if self._keys is not None and any(k.kid == kid for k in self._keys):
                return self._keys  # another thread refetched while we waited
            now = self._clock()
            if self._fetched_at is None or now - self._fetched_at >= self.min_refetch_secs:
                self._fetch_locked()
            assert self._keys is not None
            return self._keys

    def key_count(self) -> int:
        """How many signing keys are cached (for health output)."""
        return 0 if self._keys is None else len(list(self._keys))

    # --- tokens -----------------------------------------------------------------------------------

    def _claims_registry(self) -> jwt.JWTClaimsRegistry:
        options: dict[str, jwt.ClaimsOption] = {"exp": {"essential": True}, "sub": {"essential": True}}
        if self._issuer_claim:
            # Accept the issuer with or without a trailing slash: IdPs differ and both name the same issuer.
            options["iss"] = {"essential": True, "values": list({self._issuer_claim, self.issuer or "",
                                                                  f"{self.issuer}/"} - {""})}
        if self.audience:
            options["aud"] = {"essential": True, "value": self.audience}
        return jwt.JWTClaimsRegistry(leeway=self.leeway, **options)

    def decode(self, token: str | None) -> dict[str, Any]:
        """Verify ``token`` and return its claims. Raises :class:`AuthError` on any problem."""
        if token is None or not isinstance(token, str) or not token.strip():
            raise AuthError("missing bearer token")
        token = token.strip()
        if len(token) > MAX_TOKEN_CHARS:
            raise AuthError("token is too large")
        if not token.isascii() or not _COMPACT_JWS.fullmatch(token):
            raise AuthError("token is not a well-formed JWT")
        try:
            header = jws.extract_compact(token.encode("ascii")).headers()
        except (JoseError, ValueError, TypeError):
            raise AuthError("token is not a well-formed JWT") from None
        alg = header.get("alg")
        if alg not in ALLOWED_ALGORITHMS:
            raise AuthError(f"token algorithm is not allowed (accepted: {', '.join(ALLOWED_ALGORITHMS)})")
        kid = header.get("kid")
        if kid is not None and (not isinstance(kid, str) or len(kid) > 256):
            raise AuthError("token key id is invalid")

        keys = self._keys_with_kid(kid)
        if kid is not None and not any(k.kid == kid for k in keys):
            raise AuthError("token is signed by an unknown key")
        try:
            decoded = jwt.decode(token, keys, registry=_JWS_REGISTRY)
            self._claims_registry().validate(decoded.claims)
        except ExpiredTokenError:
            raise AuthError("token has expired") from None
        except BadSignatureError:
            raise AuthError("token signature is invalid") from None
        except MissingClaimError as exc:
            raise AuthError(f"token is missing a required claim ({exc.claim})") from None
        except InvalidClaimError as exc:
            raise AuthError(_claim_message(exc.claim, exc.description)) from None
        except (JoseError, ValueError, TypeError, KeyError):
            # Key/alg mismatch, no kid with several keys, undecodable payload...: one safe message.
            raise AuthError("token could not be verified") from None
        return decoded.claims

    def validate(self, token: str | None) -> Principal:
        """Verify ``token`` and map its claims to a user :class:`Principal`; :class:`AuthError` if invalid."""
        claims = self.decode(token)
        mapping = self._role_projects() if callable(self._role_projects) else self._role_projects
        try:
            return principal_from_claims(claims, mapping)
        except ClaimsError as exc:
            raise AuthError(str(exc)) from None


def _claim_message(claim: str, description: str) -> str:
    """A safe message for joserfc's InvalidClaimError (we name the claim, never echo its value)."""
    if claim == "nbf":
        return "token is not valid yet"
    if claim == "iat" and "future" in description:
        return "token was issued in the future"
    return {"iss": "token issuer is not accepted", "aud": "token audience is not accepted"}.get(
        claim, f"token claim '{claim}' is invalid")
