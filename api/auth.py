"""Who is calling: bearer API keys and OIDC JWTs become a :class:`Principal`; capabilities are checked here.

Project visibility is not only checked here: every query in ``shared`` takes the principal's visible projects
and filters by them, so no route can leak another project's data by forgetting a check.

Secrets never reach a log or a response: failure messages name what is wrong with a credential, never the
credential itself, and the only identity logged is the principal's subject (``api_key:<key_id>`` for keys,
where ``key_id`` is the public half of the key).
"""

from __future__ import annotations

import logging
import threading

from flask import current_app, g, request

from api.problems import Problem
from shared.config import Settings
from shared.db.engine import session_scope
from shared.identity import keystore
from shared.identity.apikeys import looks_like_api_key
from shared.identity.principal import Principal, anonymous_principal

log = logging.getLogger(__name__)

_validator_lock = threading.Lock()
MAX_AUTH_HEADER = 8192


def _unauthorized(detail: str) -> Problem:
    return Problem(401, detail, headers={"WWW-Authenticate": 'Bearer realm="poimen-memory"'})


def _oidc_validator(settings: Settings):  # type: ignore[no-untyped-def]
    from shared.identity.oidc import OidcValidator

    ext = current_app.extensions
    with _validator_lock:
        if "oidc_validator" not in ext:
            def mapping() -> dict[str, set[str]]:
                with session_scope() as session:
                    return dict(keystore.role_projects(session))

            ext["oidc_validator"] = OidcValidator(
                settings.oidc_issuer, settings.oidc_jwks_url, settings.oidc_audience, role_projects=mapping
            )
        return ext["oidc_validator"]


def _bearer_token() -> str:
    """The token of a well-formed ``Authorization: Bearer <token>`` header; a 401 problem otherwise."""
    header = request.headers.get("Authorization", "")
    if not header:
        raise _unauthorized("missing Authorization header; send 'Authorization: Bearer <token or API key>'")
    if len(header) > MAX_AUTH_HEADER:
        raise _unauthorized("Authorization header is too long")
    if not header.isascii() or not header.isprintable():
        # WSGI hands headers over as latin-1; a token is base64url or a pmk_ key, so anything else
        # (unicode, NUL and other control bytes) is garbage, refused before any parsing.
        raise _unauthorized("Authorization header contains characters a bearer token cannot contain")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("Authorization header must be 'Bearer <token>'")
    return token


def _authenticate(settings: Settings) -> tuple[Principal, str | None]:
    """``(principal, JWT to forward or None)`` for the current request; raises a 401/503 problem."""
    token = _bearer_token()
    if looks_like_api_key(token):
        with session_scope() as session:
            principal = keystore.authenticate_key(session, token)
        if principal is None:
            raise _unauthorized("invalid or revoked API key")
        return principal, None
    if not (settings.oidc_issuer or settings.oidc_jwks_url):
        raise _unauthorized("bearer token is not an API key and no OIDC issuer is configured")
    from shared.identity.oidc import AuthError, IdentityProviderUnavailable
    from shared.identity.principal import ClaimsError

    try:
        return _oidc_validator(settings).validate(token), token
    except IdentityProviderUnavailable as exc:
        raise Problem(503, str(exc), headers={"Retry-After": "5"}) from None
    except (AuthError, ClaimsError) as exc:
        raise _unauthorized(f"invalid token: {exc}") from None


def resolve_principal() -> Principal:
    """The caller of this request; raises a 401 problem when not authenticated.

    The outcome, success or failure, is cached on ``g``: the rate limiter (which keys on the principal)
    and the endpoint both ask, and a bad credential must cost one lookup, not two.
    """
    if "principal" in g:
        return g.principal
    if "auth_problem" in g:
        raise g.auth_problem
    settings: Settings = current_app.config["SETTINGS"]
    if settings.auth == "off":
        g.principal = anonymous_principal()
        g.bearer_token = None
        return g.principal
    try:
        principal, forward = _authenticate(settings)
    except Problem as problem:
        g.auth_problem = problem
        raise
    g.principal = principal
    g.bearer_token = forward
    return principal


def principal_or_none() -> Principal | None:
    """The caller if the request authenticates, else ``None`` (never raises): for rate-limit keys and logs."""
    try:
        return resolve_principal()
    except Problem:
        return None


def authorize(capability: str) -> Principal:
    """The caller, if it holds ``capability``; 401/403 problems otherwise."""
    principal = resolve_principal()
    if not principal.has(capability):
        raise Problem(403, f"this operation needs the '{capability}' capability")
    return principal


def require_project(principal: Principal, project: str) -> None:
    """403 unless the principal may see ``project``; the same answer whether the project exists or not."""
    if not principal.may_see(project):
        raise Problem(403, f"no access to project '{project}' (or it does not exist)")
