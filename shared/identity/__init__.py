"""Identity core: principals and capabilities, OIDC token validation, API key material.

No database and no HTTP framework here; the API wires these into requests.
"""

from shared.identity.apikeys import (
    NewKey,
    generate_api_key,
    hash_secret,
    looks_like_api_key,
    parse_api_key,
    verify_secret,
)
from shared.identity.oidc import ALLOWED_ALGORITHMS, AuthError, IdentityProviderUnavailable, OidcValidator
from shared.identity.principal import (
    ADMIN,
    CAPABILITIES,
    READ,
    WRITE,
    ClaimsError,
    Principal,
    anonymous_principal,
    api_key_principal,
    expand_capabilities,
    principal_from_claims,
)

__all__ = [
    "ADMIN",
    "ALLOWED_ALGORITHMS",
    "CAPABILITIES",
    "READ",
    "WRITE",
    "AuthError",
    "ClaimsError",
    "IdentityProviderUnavailable",
    "NewKey",
    "OidcValidator",
    "Principal",
    "anonymous_principal",
    "api_key_principal",
    "expand_capabilities",
    "generate_api_key",
    "hash_secret",
    "looks_like_api_key",
    "parse_api_key",
    "principal_from_claims",
    "verify_secret",
]
