"""A real, minimal OIDC issuer for tests: real keys, real HTTP, real signatures.

It serves ``/.well-known/openid-configuration`` and ``/jwks.json`` on ``127.0.0.1:<free port>`` from a
thread, counts how often each is fetched, rotates keys, and mints tokens with any claims, headers, keys
and algorithms (including deliberately broken ones via :func:`compact`).

Use the fixture from a conftest::

    from tests.oidc_issuer import oidc_issuer  # noqa: F401  (pytest fixture)

    def test_x(oidc_issuer):
        token = oidc_issuer.mint({"scope": "memory:read", "projects": ["a"]})
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from joserfc import jws, jwt
from joserfc.jwk import ECKey, RSAKey

DEFAULT_AUDIENCE = "poimen-memory"
DEFAULT_SUBJECT = "alice"

SigningKey = RSAKey | ECKey


def b64url(data: bytes) -> str:
    """Unpadded base64url, as JOSE uses it."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def compact(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    """Assemble a compact JWS by hand (no signing): for forged ``alg: none`` or tampered tokens."""
    seg = [b64url(json.dumps(header, separators=(",", ":")).encode()),
           b64url(json.dumps(claims, separators=(",", ":")).encode()),
           b64url(signature)]
    return ".".join(seg)


def sign_rs256_unchecked(header: dict[str, Any], claims: dict[str, Any], key: RSAKey) -> str:
    """RS256-sign any header with ``cryptography`` directly, bypassing joserfc's own header checks.

    For headers joserfc refuses to produce (an unknown ``crit`` entry), which a hostile client can still send.
    """
    signing_input = compact(header, claims).rsplit(".", 1)[0].encode("ascii")
    private = key.private_key
    assert isinstance(private, rsa.RSAPrivateKey)
    signature = private.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input.decode('ascii')}.{b64url(signature)}"


def generate_signing_key(kty: Literal["RSA", "EC"] = "RSA", kid: str | None = None) -> SigningKey:
    """A fresh private signing key with a ``kid`` (RSA 2048 or EC P-256)."""
    params = {"kid": kid or f"{kty.lower()}-{uuid.uuid4().hex[:12]}", "use": "sig"}
    if kty == "RSA":
        return RSAKey.generate_key(2048, parameters=params)  # type: ignore[arg-type]
    return ECKey.generate_key("P-256", parameters=params)  # type: ignore[arg-type]


class OidcTestIssuer:
    """An OIDC issuer serving discovery and a JWKS over HTTP, with keys it can rotate and tokens it mints."""

    def __init__(self, *, audience: str = DEFAULT_AUDIENCE, key_types: Iterable[str] = ("RSA", "EC")) -> None:
        self.audience = audience
        self._lock = threading.Lock()
        self.keys: dict[str, SigningKey] = {}  # kid -> private key, in insertion order
        for kty in key_types:
            self.add_key(kty)  # type: ignore[arg-type]
        self.jwks_fetches = 0
        self.discovery_fetches = 0
        #: When set, the JWKS endpoint answers with this HTTP status instead of the keys.
        self.jwks_status: int | None = None
        #: When set, the JWKS endpoint answers with these exact bytes (malformed or oversized documents).
        self.jwks_body: bytes | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # A short poll interval: shutdown() waits for one poll, and tests stop an issuer every time.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="oidc-test-issuer", daemon=True)

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> OidcTestIssuer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OidcTestIssuer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def issuer(self) -> str:
        """The ``iss`` value of minted tokens (and the discovery base)."""
        return self.url

    @property
    def jwks_url(self) -> str:
        """Where the JWKS is served."""
        return f"{self.url}/jwks.json"

    # --- keys -------------------------------------------------------------------------------------

    def add_key(self, kty: Literal["RSA", "EC"] = "RSA", kid: str | None = None) -> SigningKey:
        """Publish a new signing key next to the current ones; returns it."""
        key = generate_signing_key(kty, kid)
        with self._lock:
            self.keys[str(key.kid)] = key
        return key

    def rotate(self, kty: Literal["RSA", "EC"] = "RSA", *, keep_old: bool = False) -> SigningKey:
        """Publish a new key and (unless ``keep_old``) retire every previous one; returns the new key."""
        key = generate_signing_key(kty)
        with self._lock:
            if not keep_old:
                self.keys.clear()
            self.keys[str(key.kid)] = key
        return key

    def key(self, kty: str = "RSA") -> SigningKey:
        """The newest published key of type ``kty``."""
        with self._lock:
            matching = [k for k in self.keys.values() if k.key_type == kty]
        if not matching:
            raise LookupError(f"issuer has no {kty} key")
        return matching[-1]

    def jwks(self) -> dict[str, Any]:
        """The public JWKS document as served."""
        with self._lock:
            return {"keys": [k.as_dict(private=False) for k in self.keys.values()]}

    # --- tokens -----------------------------------------------------------------------------------

    def claims(self, extra: dict[str, Any] | None = None, *, ttl: int = 300,
               omit: Iterable[str] = ()) -> dict[str, Any]:
        """Default valid claims (iss, aud, sub, iat, exp) updated with ``extra``, minus ``omit``."""
        now = int(time.time())
        claims: dict[str, Any] = {"iss": self.issuer, "aud": self.audience, "sub": DEFAULT_SUBJECT,
                                  "iat": now, "exp": now + ttl}
        claims.update(extra or {})
        for name in omit:
            claims.pop(name, None)
        return claims

    def mint(self, extra: dict[str, Any] | None = None, *, key: SigningKey | None = None,
             alg: str | None = None, header: dict[str, Any] | None = None, ttl: int = 300,
             omit: Iterable[str] = (), kid: str | None = None, raw_claims: bool = False) -> str:
        """Sign a token. Defaults: the newest RSA key, RS256 (ES256 for EC keys), its own ``kid``.

        ``kid`` overrides the header's key id (to claim a key that did not sign); a ``header`` entry
        set to ``None`` is left out (``header={"kid": None}``); ``raw_claims`` signs ``extra`` exactly
        as given, without default claims.
        """
        key = key or self.key("RSA")
        alg = alg or ("ES256" if key.key_type == "EC" else "RS256")
        hdr: dict[str, Any] = {"alg": alg, "kid": kid if kid is not None else key.kid}
        hdr.update(header or {})
        hdr = {name: value for name, value in hdr.items() if value is not None}  # None = leave it out
        claims = dict(extra or {}) if raw_claims else self.claims(extra, ttl=ttl, omit=omit)
        # Non-strict registry so tests can put any header parameter in (a real IdP may too).
        registry = jws.JWSRegistry(algorithms=[alg], strict_check_header=False)
        return jwt.encode(hdr, claims, key, registry=registry)

    # --- HTTP -------------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    with issuer._lock:
                        issuer.discovery_fetches += 1
                    self._json(HTTPStatus.OK, {"issuer": issuer.issuer, "jwks_uri": issuer.jwks_url,
                                               "id_token_signing_alg_values_supported": ["RS256", "ES256"]})
                elif self.path == "/jwks.json":
                    with issuer._lock:
                        issuer.jwks_fetches += 1
                        status, body = issuer.jwks_status, issuer.jwks_body
                    if status is not None:
                        self._json(status, {"error": "unavailable"})
                    elif body is not None:
                        self._send(HTTPStatus.OK, body)
                    else:
                        self._json(HTTPStatus.OK, issuer.jwks())
                else:
                    self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

            def _json(self, status: int, body: dict[str, Any]) -> None:
                self._send(status, json.dumps(body).encode())

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep pytest output clean

        return Handler


@pytest.fixture
def oidc_issuer() -> Iterator[OidcTestIssuer]:
    """A running :class:`OidcTestIssuer` with one RSA and one EC key, stopped after the test."""
    with OidcTestIssuer() as issuer:
        yield issuer
