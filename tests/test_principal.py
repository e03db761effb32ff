"""Principal, the capability ladder, project scope and the claims mapping."""

from __future__ import annotations

import dataclasses

import pytest

from shared.identity import (
    ADMIN,
    READ,
    WRITE,
    ClaimsError,
    Principal,
    anonymous_principal,
    api_key_principal,
    expand_capabilities,
    principal_from_claims,
)


def test_ladder_admin_implies_write_implies_read() -> None:
    assert expand_capabilities([ADMIN]) == {ADMIN, WRITE, READ}
    assert expand_capabilities([WRITE]) == {WRITE, READ}
    assert expand_capabilities([READ]) == {READ}
    assert expand_capabilities(["openid", "memory:delete", ""]) == frozenset()


def test_principal_stores_closed_capabilities() -> None:
    p = Principal(subject="s", kind="user", capabilities=frozenset({WRITE}), projects=frozenset({"a"}))
    assert p.has(READ) and p.has(WRITE) and not p.has(ADMIN)
    assert p.capabilities == {READ, WRITE}
    assert p.name == "s"  # name defaults to the subject


def test_has_rejects_unknown_capability_names() -> None:
    p = anonymous_principal()
    with pytest.raises(ValueError, match="unknown capability"):
        p.has("memory:raed")


def test_may_see_needs_read_and_scope() -> None:
    reader = Principal(subject="s", kind="user", capabilities=frozenset({READ}), projects=frozenset({"a"}))
    assert reader.may_see("a") and not reader.may_see("b")
    no_caps = Principal(subject="s", kind="user", capabilities=frozenset(), projects=None)
    assert not no_caps.may_see("a")
    everything = Principal(subject="s", kind="user", capabilities=frozenset({ADMIN}), projects=None)
    assert everything.may_see("anything") and everything.all_projects


def test_visible_keeps_order_and_drops_duplicates_and_hidden() -> None:
    p = Principal(subject="s", kind="user", capabilities=frozenset({READ}), projects=frozenset({"a", "c"}))
    assert p.visible(["c", "b", "a", "c"]) == ["c", "a"]
    assert p.visible(iter(["a"])) == ["a"]
    assert p.visible([]) == []


def test_principal_is_frozen_and_hashable() -> None:
    p = Principal(subject="s", kind="user", capabilities=[READ], projects=["a"])  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.subject = "other"  # type: ignore[misc]
    same = Principal(subject="s", kind="user", capabilities=frozenset({READ}), projects=frozenset({"a"}))
    assert p == same and hash(p) == hash(same)
    assert isinstance(p.projects, frozenset)


def test_anonymous_and_api_key_principals() -> None:
    anon = anonymous_principal()
    assert anon.kind == "anonymous" and anon.projects is None and anon.has(ADMIN)
    key = api_key_principal("0123abcd", "ci-bot", ["memory:write"], ["alpha"])
    assert key.kind == "api_key" and key.subject == "api_key:0123abcd" and key.name == "ci-bot"
    assert key.has(READ) and not key.has(ADMIN) and key.visible(["alpha", "beta"]) == ["alpha"]
    assert api_key_principal("k", "", [READ], None).projects is None


def test_claims_scope_roles_and_projects() -> None:
    p = principal_from_claims({"sub": "u1", "scope": "openid profile memory:read", "roles": ["dev"],
                               "projects": ["alpha"], "email": "u1@example.org"})
    assert p.kind == "user" and p.subject == "u1" and p.name == "u1@example.org"
    assert p.capabilities == {READ} and p.roles == {"dev"} and p.projects == {"alpha"}


def test_permissions_win_over_scope() -> None:
    p = principal_from_claims({"sub": "u", "permissions": ["memory:write"], "scope": "memory:admin"})
    assert p.capabilities == {READ, WRITE}


def test_groups_are_roles_when_no_roles_claim() -> None:
    p = principal_from_claims({"sub": "u", "groups": ["authentik Admins", "sre"]})
    assert p.roles == {"authentik Admins", "sre"}
    p = principal_from_claims({"sub": "u", "roles": ["dev"], "groups": ["sre"]})
    assert p.roles == {"dev"}


def test_role_projects_widen_scope() -> None:
    mapping = {"sre": {"infra", "ci"}, "unrelated": {"secret"}}
    p = principal_from_claims({"sub": "u", "scope": "memory:read", "groups": ["sre"], "projects": ["a"]},
                              mapping)
    assert p.projects == {"a", "infra", "ci"}
    assert not p.may_see("secret")


def test_admin_sees_every_project() -> None:
    p = principal_from_claims({"sub": "root", "scope": "memory:admin", "projects": ["a"]})
    assert p.projects is None and p.may_see("zzz")


def test_no_claims_means_no_projects_and_no_capabilities() -> None:
    p = principal_from_claims({"sub": "u"})
    assert p.projects == frozenset() and p.capabilities == frozenset()
    assert p.visible(["a", "b"]) == []


def test_single_string_claims() -> None:
    p = principal_from_claims({"sub": "u", "roles": "ops team", "projects": "alpha", "permissions": "memory:read"})
    assert p.roles == {"ops team"} and p.projects == {"alpha"} and p.has(READ)


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({}, "no subject"),
        ({"sub": ""}, "no subject"),
        ({"sub": 42}, "no subject"),
        ({"sub": "x" * 1000}, "longer than"),
        ({"sub": "u", "projects": {"a": 1}}, "claim 'projects'"),
        ({"sub": "u", "projects": ["a", 3]}, "only strings"),
        ({"sub": "u", "roles": 7}, "claim 'roles'"),
        ({"sub": "u", "scope": ["memory:read", None]}, "only strings"),
        ({"sub": "u", "projects": ["p"] * 10_000}, "more than"),
        ({"sub": "u", "groups": ["g" * 10_000]}, "longer than"),
    ],
)
def test_bad_claims_are_clear_errors(claims: dict[str, object], message: str) -> None:
    with pytest.raises(ClaimsError, match=message):
        principal_from_claims(claims)
