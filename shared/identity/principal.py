"""Who is calling, what they may do, and which projects they may see.

Capabilities form a ladder: ``memory:admin`` implies ``memory:write``, which implies ``memory:read``.
A :class:`Principal` always stores the closed set (granting admin stores all three), so ``has()`` is a
plain membership test and nobody downstream has to remember the ladder.

Project scope: ``projects`` is a frozenset of project names, or ``None`` meaning every project. ``None``
is reserved for admins, API keys the lead's key store marks as unscoped, and ``MEM_AUTH=off``; a user
token never gets it by accident (missing claims mean *no* projects, not all of them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

READ = "memory:read"
WRITE = "memory:write"
ADMIN = "memory:admin"
CAPABILITIES: frozenset[str] = frozenset({READ, WRITE, ADMIN})

# What each capability brings along with it (itself included).
_IMPLIED: dict[str, frozenset[str]] = {
    READ: frozenset({READ}),
    WRITE: frozenset({WRITE, READ}),
    ADMIN: frozenset({ADMIN, WRITE, READ}),
}

PrincipalKind = Literal["user", "api_key", "anonymous"]

# Claims come from a signed token, but a misconfigured IdP can still put thousands of groups in one;
# bounding them keeps a single request's memory and the per-request set work small.
MAX_CLAIM_ITEMS = 512
MAX_CLAIM_ITEM_CHARS = 256


class ClaimsError(ValueError):
    """Claims that cannot describe a principal (no subject, wrong types). The message is safe to show."""


def expand_capabilities(capabilities: Iterable[str]) -> frozenset[str]:
    """Close a set of capability names under the ladder; names that are not capabilities are dropped.

    OIDC scopes such as ``openid`` or ``profile`` arrive in the same claim as ours, so unknown names are
    ignored rather than rejected.
    """
    closed: set[str] = set()
    for cap in capabilities:
        closed |= _IMPLIED.get(cap, frozenset())
    return frozenset(closed)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller (or the anonymous caller when auth is off).

    ``capabilities`` is always closed under the ladder (see the module docstring); ``projects`` is
    ``None`` for "every project".
    """

    subject: str
    kind: PrincipalKind
    capabilities: frozenset[str] = frozenset()
    projects: frozenset[str] | None = frozenset()
    roles: frozenset[str] = frozenset()
    name: str = ""
    # Not part of equality: two principals with the same rights are the same principal.
    claims: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # frozen=True forbids normal assignment; normalising here keeps every constructor path honest.
        object.__setattr__(self, "capabilities", expand_capabilities(self.capabilities))
        object.__setattr__(self, "roles", frozenset(self.roles))
        if self.projects is not None:
            object.__setattr__(self, "projects", frozenset(self.projects))
        if not self.name:
            object.__setattr__(self, "name", self.subject)

    def has(self, capability: str) -> bool:
        """True when the principal holds ``capability`` (directly or through a higher one).

        Raises ``ValueError`` for a name that is not a capability: a typo in a permission check must not
        silently deny (or, worse, look like it works).
        """
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; expected one of {sorted(CAPABILITIES)}")
        return capability in self.capabilities

    def may_see(self, project: str) -> bool:
        """True when the principal may read ``project``: it needs ``memory:read`` and the project in scope."""
        if READ not in self.capabilities:
            return False
        return self.projects is None or project in self.projects

    def visible(self, projects: Iterable[str]) -> list[str]:
        """The given projects this principal may read, in the given order, without duplicates."""
        seen: set[str] = set()
        out: list[str] = []
        for project in projects:
            if project not in seen and self.may_see(project):
                seen.add(project)
                out.append(project)
        return out

    @property
    def all_projects(self) -> bool:
        """True when the principal is not limited to a list of projects."""
        return self.projects is None


def anonymous_principal() -> Principal:
    """The caller when ``MEM_AUTH=off``: every capability, every project. Never use it with auth on."""
    return Principal(subject="anonymous", kind="anonymous", capabilities=CAPABILITIES, projects=None,
                     name="anonymous")


def api_key_principal(key_id: str, name: str, capabilities: Iterable[str],
                      projects: Iterable[str] | None) -> Principal:
    """The principal behind a stored API key (``projects=None`` = the key is not limited to projects)."""
    return Principal(
        subject=f"api_key:{key_id}",
        kind="api_key",
        capabilities=expand_capabilities(capabilities),
        projects=None if projects is None else frozenset(projects),
        name=name or key_id,
    )


def _string_list(claims: Mapping[str, Any], key: str, *, split: bool) -> list[str]:
    """A claim as a list of strings: a JSON list of strings, or one string (split on spaces if ``split``)."""
    value = claims.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        items: list[Any] = value.split() if split else [value]
    elif isinstance(value, list):
        items = value
    else:
        raise ClaimsError(f"claim '{key}' must be a string or a list of strings")
    if len(items) > MAX_CLAIM_ITEMS:
        raise ClaimsError(f"claim '{key}' has more than {MAX_CLAIM_ITEMS} entries")
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ClaimsError(f"claim '{key}' must contain only strings")
        if len(item) > MAX_CLAIM_ITEM_CHARS:
            raise ClaimsError(f"an entry of claim '{key}' is longer than {MAX_CLAIM_ITEM_CHARS} characters")
        if item:
            out.append(item)
    return out


def principal_from_claims(claims: Mapping[str, Any],
                          role_projects: Mapping[str, set[str]] | None = None) -> Principal:
    """Map validated token claims to a user :class:`Principal`.

    - ``sub`` (required) is the subject.
    - Roles come from ``roles``, or from ``groups`` (Authentik) when there is no ``roles`` claim.
    - Capabilities come from ``permissions`` (list) or else ``scope`` (space-separated string); names
      that are not ``memory:*`` capabilities (``openid``, ``email``...) are ignored.
    - Projects are the ``projects`` claim widened by ``role_projects[role]`` for every role held. An
      admin sees every project (``projects=None``). No claims at all means no projects.

    Raises :class:`ClaimsError` (a ``ValueError``) when ``sub`` is missing or a claim has the wrong shape.
    """
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject.strip():
        raise ClaimsError("token has no subject ('sub')")
    if len(subject) > MAX_CLAIM_ITEM_CHARS:
        raise ClaimsError(f"subject is longer than {MAX_CLAIM_ITEM_CHARS} characters")

    role_key = "roles" if "roles" in claims else "groups"
    roles = frozenset(_string_list(claims, role_key, split=False))
    cap_names = (_string_list(claims, "permissions", split=True) if "permissions" in claims
                 else _string_list(claims, "scope", split=True))
    capabilities = expand_capabilities(cap_names)

    projects: frozenset[str] | None
    if ADMIN in capabilities:
        projects = None
    else:
        granted = set(_string_list(claims, "projects", split=False))
        for role in roles:
            granted |= set((role_projects or {}).get(role, ()))
        projects = frozenset(granted)

    name = next((claims[k] for k in ("name", "preferred_username", "email")
                 if isinstance(claims.get(k), str) and claims[k]), subject)
    return Principal(subject=subject, kind="user", capabilities=capabilities, projects=projects,
                     roles=roles, name=str(name)[:MAX_CLAIM_ITEM_CHARS], claims=dict(claims))
