"""``vault generate``: write into the vault what the database knows but the vault lacks.

For one project that is

* every lesson (a fix recorded by diagnosis) as ``lessons/<id>-<slug>.md``;
* an index of the project's skills as ``skills-index.md``;
* agent-learned memories, once the service stores them (no table holds them yet).

Generated files carry ``generated_by: poimen-memory`` in their front matter. A file at a target path
without that mark was written by a person and is left alone (reported as skipped). Rendering is a pure
function of the rows, so regenerating without changes writes nothing and makes no commit.

Where it goes: with a forge configured, one commit on a branch ``generate/<project>-<digest>`` and a
pull request (the digest is of the proposed content, so proposing the same content twice finds the
branch and makes nothing new); without one, a commit on the local vault working copy (pushed when the vault
has a remote), after which the changed files are ingested right away so they are searchable.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.config import Settings, get_settings
from shared.db.engine import session_scope
from shared.db.models import Job, Lesson, Project, Skill, VaultEvent
from shared.forge.client import FileChange, ForgejoClient, ForgejoError, ForgejoNotFound, ForgejoUnavailable
from shared.ingest.pipeline import INGEST_KIND, JobCancelled, run_ingest_step
from shared.ingest.sources import SourceError
from shared.jobs import store
from shared.jobs.broker import dispatch
from shared.jobs.runner import run_step
from shared.vault.git import GitError
from shared.vault.markdown import slugify
from shared.vault.paths import UnsafePath, resolve_vault_path, validate_project_name
from shared.vault.review import COMMITTER, forge_client, forge_configured
from shared.vault.sync import Dispatcher, VaultRemoteUnreachable, vault_lock, vault_repo

GENERATE_KIND = "vault"
GENERATE_STEP = "vault"
GENERATED_BY = "poimen-memory"
SKILLS_INDEX = "skills-index.md"
MAX_SLUG_CHARS = 60
_MARK = re.compile(rf"^generated_by:\s*['\"]?{re.escape(GENERATED_BY)}['\"]?\s*$", re.MULTILINE)


class ForgeUnavailable(ConnectionError):
    """The forge did not answer: the job runner retries with backoff."""


# --------------------------------------------------------------------------------------------------
# Rendering (pure)


def _front_matter(data: dict[str, Any]) -> str:
    return "---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000) + "---\n"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks inside ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _cell(text: str) -> str:
    return _one_line(text).replace("\\", "\\\\").replace("|", "\\|")


def lesson_path(lesson: Lesson) -> str:
    """Where a lesson lives inside its project folder."""
    slug = re.sub(r"[^a-z0-9-]+", "-", slugify(_one_line(lesson.title)))[:MAX_SLUG_CHARS].strip("-")
    return f"lessons/{lesson.id}-{slug or 'lesson'}.md"


def render_lesson(lesson: Lesson) -> str:
    """A lesson as a markdown document (front matter, the fix, the symptom it was matched on)."""
    title = _one_line(lesson.title) or f"Lesson {lesson.id}"
    front = {
        "title": title,
        "tags": ["lesson", lesson.tool],
        "tool": lesson.tool,
        "signature": lesson.sig_sha,
        "symptom": lesson.sym_sha,
        "successes": lesson.success_count,
        "failures": lesson.failure_count,
        "lesson_id": lesson.id,
        "generated_by": GENERATED_BY,
    }
    parts = [_front_matter(front), f"# {title}\n", "## Fix\n", lesson.solution.strip() + "\n"]
    if lesson.normalised.strip():
        fence = _fence(lesson.normalised)
        parts += ["## Symptom\n", f"{fence}text\n{lesson.normalised.strip()}\n{fence}\n"]
    if lesson.source.strip():
        parts.append(f"Recorded from: {_one_line(lesson.source)}\n")
    return "\n".join(parts)


def render_skills_index(project: str, skills: list[Skill]) -> str:
    """A table of the project's skills, linking each skill document."""
    lines = [
        _front_matter({"title": f"Skills of {project}", "tags": ["skills", "index"], "generated_by": GENERATED_BY}),
        f"# Skills of {project}\n",
        "| Skill | Description | Tags |",
        "| --- | --- | --- |",
    ]
    for skill in skills:
        link = f"<{skill.path}>" if " " in skill.path else skill.path
        label = _cell(skill.title or skill.name).replace("[", "\\[").replace("]", "\\]")
        lines.append(f"| [{label}]({link}) | {_cell(skill.description)} | {_cell(', '.join(skill.tags))} |")
    return "\n".join(lines) + "\n"


def render_project(session: Session, project: str) -> dict[str, str]:
    """Every generated file of ``project``: path inside the project folder -> markdown text."""
    files: dict[str, str] = {}
    for lesson in session.scalars(select(Lesson).where(Lesson.project == project).order_by(Lesson.id)):
        files[lesson_path(lesson)] = render_lesson(lesson)
    skills = list(
        session.scalars(
            select(Skill).join(Project, Skill.project_id == Project.id).where(Project.name == project).order_by(Skill.path)
        )
    )
    if skills:
        files[SKILLS_INDEX] = render_skills_index(project, skills)
    return files


def is_generated(data: bytes) -> bool:
    """True when a file's front matter carries this generator's mark (so it may be rewritten)."""
    head = data[:8192].decode("utf-8", "replace")
    if not head.startswith("---"):
        return False
    end = head.find("\n---", 3)
    return bool(_MARK.search(head[: end if end > 0 else len(head)]))


# --------------------------------------------------------------------------------------------------
# Jobs


def submit_generate(session: Session, project: str, submitted_by: str) -> store.JobView:
    """Create a ``vault`` job for ``project`` (the caller dispatches its ``vault`` step)."""
    validate_project_name(project)
    job, _ = store.create_job(
        session, kind=GENERATE_KIND, first_step=GENERATE_STEP, project=project,
        payload={"project": project}, submitted_by=submitted_by,
    )
    return store.JobView.of(job)


def _commit_locally(settings: Settings, project: str, files: dict[str, str], job_id: str, send: Dispatcher) -> dict[str, Any]:
    root = settings.resolved_vault_dir
    written: list[str] = []
    skipped: list[dict[str, str]] = []
    with vault_lock(settings):
        repo = vault_repo(settings)
        try:
            if not repo.is_repo():
                root.mkdir(parents=True, exist_ok=True)
                repo.init(settings.vault_branch)
        except GitError as exc:
            raise SourceError(f"cannot prepare the vault working copy: {exc}") from None
        for rel, text in sorted(files.items()):
            try:
                target = resolve_vault_path(root, project, rel)
            except UnsafePath as exc:
                skipped.append({"path": rel, "reason": str(exc)})
                continue
            encoded = text.encode("utf-8")
            if target.exists():
                with target.open("rb") as handle:
                    existing = handle.read(len(encoded) + 1)
                if not is_generated(existing):
                    skipped.append({"path": rel, "reason": "a document not written by the generator is already there"})
                    continue
                if existing == encoded:
                    continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(encoded)
            written.append(rel)
        if not written:
            return {"status": "unchanged", "written": [], "skipped": skipped}
        try:
            commit = repo.commit_paths(
                [f"{project}/{rel}" for rel in written],
                f"Generate {len(written)} document(s) of {project} from the memory database",
                author_name=COMMITTER.name, author_email=COMMITTER.email,
            )
        except GitError as exc:
            raise SourceError(f"cannot commit the generated documents: {exc}") from None
        if commit is None:
            return {"status": "unchanged", "written": [], "skipped": skipped}
        if settings.vault_remote:
            try:
                repo.push(settings.vault_branch)
            except GitError as exc:
                raise VaultRemoteUnreachable(f"committed {commit[:12]} but cannot push it: {exc}") from None
        ingest_job = _ingest_generated(settings, project, written, commit, job_id, send)
    return {"status": "committed", "commit": commit, "written": written, "skipped": skipped, "ingest_job": ingest_job}


def _ingest_generated(settings: Settings, project: str, paths: list[str], commit: str, job_id: str, send: Dispatcher) -> str:
    """Ingest the files just committed (under the vault lock); the project's indexed commit is left to the sync."""
    source = {
        "type": "vault", "path": str(settings.resolved_vault_dir / project), "mode": "changes",
        "changed": paths, "delete": [], "commit": commit, "advance_commit": False,
    }
    with session_scope() as session:
        child, _ = store.create_job(
            session, kind=INGEST_KIND, first_step="ingest", project=project,
            payload={"source": source, "git_sha": commit, "generate_job": job_id}, submitted_by=f"generate:{job_id}",
        )
        child_id = child.id
    run_step("ingest", child_id, lambda j: run_ingest_step(j, send))
    return child_id


def _propose(settings: Settings, project: str, files: dict[str, str]) -> dict[str, Any]:
    client: ForgejoClient = forge_client(settings)
    with client:
        default = client.default_branch()
        changes: list[FileChange] = []
        skipped: list[dict[str, str]] = []
        for rel, text in sorted(files.items()):
            vault_path = f"{project}/{rel}"
            encoded = text.encode("utf-8")
            try:
                current = client.get_file(vault_path, ref=default)
            except ForgejoNotFound:
                changes.append(FileChange("create", vault_path, content=encoded))
                continue
            if not is_generated(current.content):
                skipped.append({"path": rel, "reason": "a document not written by the generator is already there"})
            elif current.content != encoded:
                changes.append(FileChange("update", vault_path, content=encoded, sha=current.sha))
        if not changes:
            return {"status": "unchanged", "written": [], "skipped": skipped}
        digest = hashlib.sha256(
            b"".join(c.path.encode() + b"\0" + (c.content or b"") + b"\0" for c in changes)
        ).hexdigest()[:12]
        branch = f"generate/{project}-{digest}"
        written = [c.path.partition("/")[2] for c in changes]
        try:
            client.get_branch(branch)
            proposed = True
        except ForgejoNotFound:
            proposed = False
        if proposed:
            with session_scope() as session:
                pr = session.scalars(
                    select(VaultEvent.detail["pr_number"].as_integer())
                    .where(VaultEvent.kind == "generate-proposed", VaultEvent.detail["branch"].as_string() == branch)
                    .order_by(VaultEvent.id.desc())
                ).first()
            return {"status": "already proposed", "branch": branch, "pr_number": pr, "written": [], "skipped": skipped}
        message = f"Generate {len(changes)} document(s) of {project} from the memory database"
        result = client.change_files(changes, message, branch=default, new_branch=branch, author=COMMITTER,
                                     committer=COMMITTER)
        body = "Written by `vault generate`: lessons and indexes the memory database holds but the vault lacked.\n\n"
        body += "\n".join(f"- `{project}/{p}`" for p in written)
        pull = client.create_pull_request(message, head=branch, base=default, body=body)
    with session_scope() as session:
        session.add(VaultEvent(kind="generate-proposed", project=project, commit=result.commit_sha,
                               detail={"branch": branch, "pr_number": pull.number, "paths": written}, handled=True))
    return {"status": "proposed", "branch": branch, "pr_number": pull.number, "pr_url": pull.html_url,
            "commit": result.commit_sha, "written": written, "skipped": skipped}


def run_generate_step(job_id: str, send: Dispatcher = dispatch) -> None:
    """The ``vault`` step: render the project's documents and commit or propose what changed."""
    with session_scope() as session:
        job = store.claim(session, job_id, GENERATE_STEP)
        if job is None:
            return
        project = job.project or ""
        files = render_project(session, project)
    settings = get_settings()
    if not files:
        result: dict[str, Any] = {"status": "nothing to generate", "written": [], "skipped": []}
    elif forge_configured(settings):
        try:
            result = _propose(settings, project, files)
        except ForgejoUnavailable as exc:
            raise ForgeUnavailable(str(exc)) from None
        except ForgejoError as exc:
            raise SourceError(f"the forge refused the proposal: {exc}") from None
    else:
        result = _commit_locally(settings, project, files, job_id, send)
    with session_scope() as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status != "running" or job.step != GENERATE_STEP:
            raise JobCancelled(job_id)
        store.succeed(session, job, result={**result, "documents": len(files)})
