"""``mem roles``: which projects an OIDC role (or Authentik group) may see, in the ``role_projects`` table."""

from __future__ import annotations

import json

import click

from cli.app import mem


@mem.group()
def roles() -> None:
    """Map OIDC roles/groups to projects (a token's 'projects' claim is widened by these grants)."""


@roles.command("grant")
@click.argument("role")
@click.argument("project")
def roles_grant(role: str, project: str) -> None:
    """Let members of ROLE see PROJECT (effective on their next request)."""
    from api.schemas import check_project_name
    from shared.db.engine import session_scope
    from shared.identity import keystore

    try:
        check_project_name(project)
        with session_scope() as session:
            created = keystore.grant_role_project(session, role, project)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(f"{'granted' if created else 'already granted'}: role {role} -> project {project}")


@roles.command("revoke")
@click.argument("role")
@click.argument("project")
def roles_revoke(role: str, project: str) -> None:
    """Withdraw ROLE's access to PROJECT."""
    from shared.db.engine import session_scope
    from shared.identity import keystore

    with session_scope() as session:
        if not keystore.revoke_role_project(session, role, project):
            raise click.ClickException(f"role {role} has no grant for project {project}")
    click.echo(f"revoked: role {role} -> project {project}")


@roles.command("list")
@click.option("--json", "as_json", is_flag=True)
def roles_list(as_json: bool) -> None:
    """Every role and the projects it may see."""
    from shared.db.engine import session_scope
    from shared.identity import keystore

    with session_scope() as session:
        mapping = {role: sorted(projects) for role, projects in sorted(keystore.role_projects(session).items())}
    if as_json:
        click.echo(json.dumps(mapping, indent=2))
        return
    for role, projects in mapping.items():
        click.echo(f"{role}  {','.join(projects)}")
