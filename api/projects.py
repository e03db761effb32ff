"""Projects and skills the caller may see."""

from __future__ import annotations

from flask import Blueprint, jsonify

from api.contract import endpoint
from api.schemas import ProjectList, SkillList, SkillQuery
from shared.catalog import list_projects, list_skills
from shared.db.engine import session_scope
from shared.identity.principal import READ, Principal

bp = Blueprint("projects", __name__, url_prefix="/memory")


@endpoint(bp, "/projects", "GET", summary="Projects with document and chunk counts", capability=READ,
          responses={200: ("projects", ProjectList)})
def projects(principal: Principal):  # type: ignore[no-untyped-def]
    """Every project the caller may see."""
    with session_scope() as session:
        return jsonify({"projects": list_projects(session, principal)})


@endpoint(bp, "/skills", "GET", summary="Skills (vault skills/ documents) from their front matter",
          capability=READ, query=SkillQuery, responses={200: ("skills", SkillList)})
def skills(principal: Principal, query: SkillQuery):  # type: ignore[no-untyped-def]
    """Skills of the projects the caller may see, optionally one project or one tag."""
    with session_scope() as session:
        return jsonify({"skills": list_skills(session, principal, project=query.project, tag=query.tag)})
