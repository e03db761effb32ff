"""The lesson store: fixes recorded against a failure's signature or symptom, found again by either.

A lesson is keyed two ways:

* ``sig_sha``: the exact failure signature of a CI log (:func:`shared.diagnosis.extract_signature`);
* ``sym_sha``: the projected symptom (:func:`shared.diagnosis.project_symptom`) of the lesson's
  ``normalised`` text, so a person typing "unable to resolve dependency" and a log whose signature
  line says the same thing in other words can meet.

Invariant: ``sym_sha == project_symptom(tool, normalised).sym_sha`` whenever ``normalised`` is set, so
symptoms can be re-projected (keyword matching) without a second column.

Every read takes the projects the caller may see (``None`` = all); a lesson of another project is
never returned and its id answers like a missing one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Select, or_, select, update
from sqlalchemy.orm import Session

from shared.db.models import Lesson
from shared.diagnosis.classify import resolve_tool
from shared.diagnosis.signature import Signature, extract_signature
from shared.diagnosis.symptom import MAX_SYMPTOM_CHARS, project_symptom

SHA_RE = re.compile(r"[0-9a-f]{64}")
MAX_TITLE_CHARS = 300
MAX_SOLUTION_CHARS = 20_000
MAX_SOURCE_CHARS = 2_000
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
# Lessons re-projected per keyword lookup: bounded work for a fuzzy fallback, newest first.
MAX_KEYWORD_SCAN = 2_000
# A keyword match needs at least this many keywords in the query: one shared word says too little.
MIN_MATCH_KEYWORDS = 2

MatchKind = Literal["sig_sha", "sym_sha", "keywords", "filter"]


class LessonError(ValueError):
    """A lesson cannot be recorded or looked up as asked; the message says what to change."""


class LessonNotFound(LookupError):
    """No lesson with that id among the projects the caller may see."""


@dataclass(frozen=True)
class LessonKeys:
    """What a new lesson is found by: its tool, signature, symptom and the text the symptom came from."""

    tool: str
    sig_sha: str | None
    sym_sha: str | None
    normalised: str
    signature: Signature | None = None


@dataclass(frozen=True)
class LessonView:
    """A lesson as the API and the CLI show it, with how it was matched."""

    id: int
    project: str
    tool: str
    sig_sha: str | None
    sym_sha: str | None
    normalised: str
    title: str
    solution: str
    source: str
    created_by: str
    success_count: int
    failure_count: int
    created_at: datetime
    updated_at: datetime
    match: MatchKind = "filter"

    @classmethod
    def of(cls, row: Lesson, match: MatchKind = "filter") -> LessonView:
        """Snapshot a row."""
        return cls(
            id=row.id, project=row.project, tool=row.tool, sig_sha=row.sig_sha, sym_sha=row.sym_sha,
            normalised=row.normalised, title=row.title, solution=row.solution, source=row.source,
            created_by=row.created_by, success_count=row.success_count, failure_count=row.failure_count,
            created_at=row.created_at, updated_at=row.updated_at, match=match,
        )

    @property
    def success_rate(self) -> float | None:
        """Share of reported outcomes that worked; ``None`` before any outcome is reported."""
        total = self.success_count + self.failure_count
        return round(self.success_count / total, 4) if total else None

    @property
    def rank_score(self) -> float:
        """Laplace-smoothed success rate, (s + 1) / (s + f + 2): an untried lesson ranks at 0.5, between
        a lesson that worked and one that did not, and one report cannot make a rate of 1.0."""
        return (self.success_count + 1) / (self.success_count + self.failure_count + 2)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a lesson."""
        return {
            "id": self.id, "project": self.project, "tool": self.tool, "sig_sha": self.sig_sha,
            "sym_sha": self.sym_sha, "normalised": self.normalised, "title": self.title,
            "solution": self.solution, "source": self.source, "created_by": self.created_by,
            "success_count": self.success_count, "failure_count": self.failure_count,
            "success_rate": self.success_rate, "match": self.match,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


def check_sha(value: str, what: str) -> str:
    """``value`` lower-cased if it is a sha256 hex digest; :class:`LessonError` otherwise."""
    cleaned = value.strip().lower()
    if not SHA_RE.fullmatch(cleaned):
        raise LessonError(f"{what} must be 64 hexadecimal characters (a sha256)")
    return cleaned


def lesson_keys(
    tool: str,
    *,
    log: str | None = None,
    sig_sha: str | None = None,
    symptom: str | None = None,
) -> LessonKeys:
    """Work out a new lesson's keys from a log, a known signature hash and/or a symptom text.

    A log gives the signature (its tool wins over "auto") and, unless a symptom text is given too, the
    symptom; a symptom text gives the symptom. ``sig_sha`` may not be combined with a log (the log's own
    signature would contradict or repeat it). Raises :class:`LessonError` or ``UnknownToolError``.
    """
    name = resolve_tool(tool)
    if log is not None and sig_sha is not None:
        raise LessonError("give either log or sig_sha, not both (the log's signature is its sig_sha)")
    if log is None and sig_sha is None and not (symptom and symptom.strip()):
        raise LessonError("a lesson needs something to be found by: a log, a sig_sha or a symptom text")
    signature: Signature | None = None
    normalised = ""
    if log is not None:
        if not log.strip():
            raise LessonError("log is empty")
        signature = extract_signature(log, name)
        if not signature.found or signature.sig_sha is None:
            raise LessonError("no recognisable error in the log; give a sig_sha or a symptom text instead")
        name, sig_sha, normalised = signature.tool, signature.sig_sha, signature.normalised or ""
    elif sig_sha is not None:
        sig_sha = check_sha(sig_sha, "sig_sha")
    if name == "auto":
        raise LessonError("tool 'auto' needs a log to detect the tool from; name the tool")
    if symptom is not None and symptom.strip():
        normalised = " ".join(symptom.split())[:MAX_SYMPTOM_CHARS]
    sym_sha = project_symptom(name, normalised).sym_sha if normalised else None
    return LessonKeys(tool=name, sig_sha=sig_sha, sym_sha=sym_sha, normalised=normalised, signature=signature)


def record_lesson(
    session: Session,
    *,
    project: str,
    keys: LessonKeys,
    title: str,
    solution: str,
    source: str = "",
    created_by: str = "",
) -> tuple[LessonView, bool]:
    """Store a lesson; returns ``(lesson, created)``.

    Recording the same fix for the same failure in the same project again returns the first lesson
    (``created`` False) instead of a duplicate that would split its outcome counts.
    """
    title, solution = title.strip(), solution.strip()
    if not title or not solution:
        raise LessonError("title and solution must not be empty")
    if len(title) > MAX_TITLE_CHARS or len(solution) > MAX_SOLUTION_CHARS or len(source) > MAX_SOURCE_CHARS:
        raise LessonError(
            f"title, solution and source are limited to {MAX_TITLE_CHARS}, {MAX_SOLUTION_CHARS} "
            f"and {MAX_SOURCE_CHARS} characters"
        )
    existing = session.scalars(
        select(Lesson).where(
            Lesson.project == project, Lesson.tool == keys.tool, Lesson.solution == solution,
            Lesson.sig_sha.is_(None) if keys.sig_sha is None else Lesson.sig_sha == keys.sig_sha,
            Lesson.sym_sha.is_(None) if keys.sym_sha is None else Lesson.sym_sha == keys.sym_sha,
        ).limit(1)
    ).first()
    if existing is not None:
        return LessonView.of(existing), False
    row = Lesson(
        project=project, sig_sha=keys.sig_sha, sym_sha=keys.sym_sha, tool=keys.tool, normalised=keys.normalised,
        title=title, solution=solution, source=source.strip(), created_by=created_by,
        success_count=0, failure_count=0,
    )
    session.add(row)
    session.flush()
    session.refresh(row)
    return LessonView.of(row), True


def _scoped(stmt: Select[Any], projects: Sequence[str] | None) -> Select[Any]:
    return stmt if projects is None else stmt.where(Lesson.project.in_(list(projects)))


def get_lesson(session: Session, lesson_id: int, projects: Sequence[str] | None) -> LessonView:
    """One lesson among ``projects``; :class:`LessonNotFound` for a missing or hidden one alike."""
    row = session.scalars(_scoped(select(Lesson).where(Lesson.id == lesson_id), projects)).first()
    if row is None:
        raise LessonNotFound(f"no lesson {lesson_id}")
    return LessonView.of(row)


def record_outcome(session: Session, lesson_id: int, worked: bool, projects: Sequence[str] | None) -> LessonView:
    """Count one reported outcome (atomically, so concurrent reports are all counted)."""
    get_lesson(session, lesson_id, projects)  # 404 before touching a hidden lesson
    column = Lesson.success_count if worked else Lesson.failure_count
    session.execute(
        update(Lesson)
        .where(Lesson.id == lesson_id)
        .values({column.key: column + 1, "updated_at": datetime.now(UTC)})
        .execution_options(synchronize_session=False)
    )
    session.expire_all()
    return get_lesson(session, lesson_id, projects)


def list_lessons(
    session: Session,
    projects: Sequence[str] | None,
    *,
    sig_sha: str | None = None,
    sym_sha: str | None = None,
    tool: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[LessonView]:
    """Lessons among ``projects`` matching every filter given, best-rated first.

    With both ``sig_sha`` and ``sym_sha`` a lesson matching either is returned (the two keys of one
    failure); each result says which key matched.
    """
    stmt = _scoped(select(Lesson), projects)
    if sig_sha and sym_sha:
        stmt = stmt.where(or_(Lesson.sig_sha == sig_sha, Lesson.sym_sha == sym_sha))
    elif sig_sha:
        stmt = stmt.where(Lesson.sig_sha == sig_sha)
    elif sym_sha:
        stmt = stmt.where(Lesson.sym_sha == sym_sha)
    if tool:
        stmt = stmt.where(Lesson.tool == tool)
    rows = session.scalars(stmt.order_by(Lesson.updated_at.desc(), Lesson.id.desc()).limit(MAX_KEYWORD_SCAN)).all()
    views = []
    for row in rows:
        match: MatchKind = "filter"
        if sig_sha and row.sig_sha == sig_sha:
            match = "sig_sha"
        elif sym_sha and row.sym_sha == sym_sha:
            match = "sym_sha"
        views.append(LessonView.of(row, match))
    return _ranked(views)[: max(1, min(limit, MAX_LIMIT))]


def _ranked(views: list[LessonView]) -> list[LessonView]:
    """Exact signature matches first, then symptom, then keywords; within each, the best-rated, then newest."""
    order = {"sig_sha": 0, "sym_sha": 1, "keywords": 2, "filter": 3}
    return sorted(views, key=lambda v: (order[v.match], -v.rank_score, -v.updated_at.timestamp(), -v.id))


def find_lessons(
    session: Session,
    projects: Sequence[str] | None,
    *,
    tool: str,
    sig_sha: str | None = None,
    text: str | None = None,
    keywords: bool = True,
    limit: int = DEFAULT_LIMIT,
) -> list[LessonView]:
    """Lessons for one failure: by ``sig_sha``, by the symptom of ``text``, and (``keywords``) by keywords.

    The keyword fallback runs only when no exact key matched: a lesson of the same tool whose symptom
    keywords include every keyword of ``text`` (at least :data:`MIN_MATCH_KEYWORDS` of them) matches,
    so "unable to resolve dependency" finds a lesson recorded for "ERESOLVE unable to resolve dependency
    tree". ``tool`` must be a known tool (not "auto").
    """
    name = resolve_tool(tool)
    symptom = project_symptom(name, text) if text and text.strip() else None
    sym_sha = symptom.sym_sha if symptom and symptom.keywords else None
    if sig_sha is None and sym_sha is None:
        return []
    exact = list_lessons(session, projects, sig_sha=sig_sha, sym_sha=sym_sha, limit=limit)
    if exact or not keywords or symptom is None or len(symptom.keywords) < MIN_MATCH_KEYWORDS:
        return exact
    wanted = set(symptom.keywords)
    rows = session.scalars(
        _scoped(select(Lesson), projects)
        .where(Lesson.tool == name, Lesson.normalised != "")
        .order_by(Lesson.updated_at.desc(), Lesson.id.desc())
        .limit(MAX_KEYWORD_SCAN)
    ).all()
    found = [LessonView.of(r, "keywords") for r in rows if wanted <= set(project_symptom(name, r.normalised).keywords)]
    return _ranked(found)[: max(1, min(limit, MAX_LIMIT))]


def explain(
    session: Session,
    projects: Sequence[str] | None,
    *,
    tool: str = "auto",
    sig_sha: str | None = None,
    query: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """``mem sig explain``: ``{found, sig_sha, sym_sha, count, solutions: [{source, timestamp, solution,
    success_rate, ...}]}`` for a signature hash or a symptom text."""
    if sig_sha is None and not (query and query.strip()):
        raise LessonError("give a sig_sha or a query (symptom text)")
    if sig_sha is not None:
        sig_sha = check_sha(sig_sha, "sig_sha")
    name = resolve_tool(tool)
    if query and query.strip() and name == "auto":
        raise LessonError("a symptom query needs a tool (--tool npm, cargo, ...): symptoms are compared per tool")
    if name == "auto":
        name = "generic"  # only a sig_sha: the tool plays no part in the lookup
    lessons = find_lessons(session, projects, tool=name, sig_sha=sig_sha, text=query, limit=limit)
    sym_sha = project_symptom(name, query).sym_sha if query and query.strip() else None
    return {
        "found": bool(lessons),
        "sig_sha": sig_sha,
        "sym_sha": sym_sha,
        "count": len(lessons),
        "solutions": [
            {
                "id": v.id, "project": v.project, "title": v.title, "source": v.source,
                "timestamp": v.updated_at.isoformat() if v.updated_at else None,
                "solution": v.solution, "success_rate": v.success_rate,
                "successes": v.success_count, "failures": v.failure_count, "match": v.match,
            }
            for v in lessons
        ],
    }
