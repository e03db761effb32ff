"""API keys in the database: create (shown once), list, revoke, authenticate; and the role->project map."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from shared.db.models import ApiKey, RoleProject
from shared.identity.apikeys import generate_api_key, parse_api_key, verify_secret
from shared.identity.principal import CAPABILITIES, Principal, api_key_principal

# last_used_at is a hint for humans; writing it on every request would turn reads into writes.
_LAST_USED_GRANULARITY = timedelta(minutes=5)


@dataclass(frozen=True)
class KeyInfo:
    """What ``mem keys list`` shows about a key (never its secret)."""

    key_id: str
    name: str
    capabilities: list[str]
    projects: list[str] | None
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None

    def to_dict(self) -> dict[str, object]:
        """JSON shape."""
        return {
            "key_id": self.key_id,
            "name": self.name,
            "capabilities": self.capabilities,
            "projects": self.projects,
            "created_at": self.created_at.isoformat(),
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
        }


def create_key(
    session: Session,
    *,
    name: str,
    capabilities: Iterable[str],
    projects: Iterable[str] | None,
    created_by: str = "cli",
) -> tuple[str, KeyInfo]:
    """Store a new key and return ``(plaintext, info)``; the plaintext exists only in this return value."""
    caps = sorted(set(capabilities))
    unknown = [c for c in caps if c not in CAPABILITIES]
    if unknown or not caps:
        raise ValueError(f"capabilities must be among {sorted(CAPABILITIES)}; got {caps}")
    if not name.strip() or len(name) > 200:
        raise ValueError("a key needs a name of 1-200 characters")
    new = generate_api_key()
    row = ApiKey(
        key_id=new.key_id,
        name=name.strip(),
        secret_hash=new.secret_hash,
        capabilities=caps,
        projects=sorted(set(projects)) if projects is not None else None,
        created_by=created_by,
    )
    session.add(row)
    session.flush()
    return new.plaintext, _info(row)


def _info(row: ApiKey) -> KeyInfo:
    return KeyInfo(
        key_id=row.key_id,
        name=row.name,
        capabilities=list(row.capabilities),
        projects=list(row.projects) if row.projects is not None else None,
        created_at=row.created_at or datetime.now(UTC),
        revoked_at=row.revoked_at,
        last_used_at=row.last_used_at,
    )


def list_keys(session: Session) -> list[KeyInfo]:
    """Every key, newest first."""
    return [_info(r) for r in session.scalars(select(ApiKey).order_by(ApiKey.created_at.desc()))]


def revoke_key(session: Session, key_id: str) -> bool:
    """Revoke a key; True if it existed and was active."""
    res = session.execute(
        update(ApiKey).where(ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None)).values(revoked_at=datetime.now(UTC))
    )
    return bool(res.rowcount)


def authenticate_key(session: Session, token: str) -> Principal | None:
    """The principal of a valid, unrevoked key, or None (malformed, unknown, revoked, wrong secret)."""
    parsed = parse_api_key(token)
    if parsed is None:
        return None
    key_id, secret = parsed
    row = session.get(ApiKey, key_id)
    if row is None or row.revoked_at is not None or not verify_secret(secret, row.secret_hash):
        return None
    now = datetime.now(UTC)
    if row.last_used_at is None or now - row.last_used_at > _LAST_USED_GRANULARITY:
        row.last_used_at = now
    return api_key_principal(row.key_id, row.name, row.capabilities, row.projects)


def role_projects(session: Session) -> Mapping[str, set[str]]:
    """The role -> projects mapping configured in the database."""
    mapping: dict[str, set[str]] = {}
    for role, project in session.execute(select(RoleProject.role, RoleProject.project)):
        mapping.setdefault(role, set()).add(project)
    return mapping


def grant_role_project(session: Session, role: str, project: str) -> bool:
    """Let OIDC role (or group) ``role`` see ``project``; True if the grant is new."""
    role, project = role.strip(), project.strip()
    if not role or not project or len(role) > 256 or len(project) > 100:
        raise ValueError("role must be 1-256 characters and project 1-100")
    if session.get(RoleProject, (role, project)) is not None:
        return False
    session.add(RoleProject(role=role, project=project))
    session.flush()
    return True


def revoke_role_project(session: Session, role: str, project: str) -> bool:
    """Remove a role -> project grant; True if it existed."""
    res = session.execute(delete(RoleProject).where(RoleProject.role == role, RoleProject.project == project))
    return bool(res.rowcount)


def has_any_key(session: Session) -> bool:
    """True once any key was ever created (``mem up`` creates the first admin key on a fresh data dir)."""
    return session.scalar(select(ApiKey.key_id).limit(1)) is not None
