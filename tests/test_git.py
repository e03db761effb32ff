"""GitRepo against a real git remote served over smart HTTP (tests/gitserver.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.vault.git import Change, GitError, GitObjectMissing, GitRepo, redact
from tests.gitserver import GitServer, git_server, make_git_server  # noqa: F401 - fixtures

SEED = {
    "ops/runbooks/deploy.md": "# Deploy\n\nRun the pipeline.\n",
    "ops/runbooks/rollback.md": "# Rollback\n\nRevert the release.\n",
    "ops/skills/triage.md": "# Triage\n\nRead the logs first.\nThen the metrics.\nThen the traces.\n",
    "web/notes/cache.md": "# Cache\n\nWarm it before traffic.\n",
}


@pytest.fixture
def remote(git_server: GitServer) -> str:  # noqa: F811 - pytest fixture injection
    return git_server.create_repo("vault", files=SEED)


@pytest.fixture
def local_repo(tmp_path: Path) -> GitRepo:
    """A working copy with no remote, for checks that never reach the network."""
    repo = GitRepo(tmp_path / "local", timeout=30)
    repo.init("main")
    (repo.workdir / "ops").mkdir()
    (repo.workdir / "ops" / "a.md").write_text("# A\n")
    return repo


@pytest.fixture
def repo(tmp_path: Path, remote: str) -> GitRepo:
    repo = GitRepo(tmp_path / "vault", timeout=30)
    repo.clone(remote, "main")
    return repo


def test_clone_over_http_checks_out_the_branch(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    assert repo.is_repo()
    assert repo.head_sha() == git_server.branch_sha("vault")
    assert repo.ls_files() == sorted(SEED)
    assert repo.ls_files("ops/runbooks") == ["ops/runbooks/deploy.md", "ops/runbooks/rollback.md"]
    assert repo.ls_files("ops/runbooks/") == ["ops/runbooks/deploy.md", "ops/runbooks/rollback.md"]
    assert repo.ls_files("op") == []  # a prefix is a folder, not a string prefix
    assert (repo.workdir / "web/notes/cache.md").read_text() == SEED["web/notes/cache.md"]
    assert git_server.request_count > 0


def test_sync_fast_forward_reports_every_kind_of_change(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    before = repo.head_sha()
    editor = git_server.editor("vault")
    editor.write("ops/runbooks/canary.md", "# Canary\n\nShip to 1% first.\n")
    editor.write("ops/runbooks/deploy.md", "# Deploy\n\nRun the pipeline, then watch the dashboard.\n")
    editor.rename("ops/skills/triage.md", "ops/skills/incident triage.md")
    editor.delete("web/notes/cache.md")
    pushed = editor.commit_and_push("Add canary, edit deploy, rename triage, drop cache")

    outcome = repo.sync_to_remote("main")

    assert outcome.old_sha == before
    assert outcome.new_sha == pushed
    assert outcome.forced is False
    assert outcome.changed
    assert repo.head_sha() == pushed
    changes = repo.changes(outcome.old_sha, outcome.new_sha)
    assert sorted(changes, key=lambda c: c.path) == [
        Change("added", "ops/runbooks/canary.md"),
        Change("modified", "ops/runbooks/deploy.md"),
        Change("renamed", "ops/skills/incident triage.md", "ops/skills/triage.md"),
        Change("deleted", "web/notes/cache.md"),
    ]
    assert not (repo.workdir / "web/notes/cache.md").exists()
    assert (repo.workdir / "ops/skills/incident triage.md").exists()


def test_sync_without_new_commits_is_a_no_op(repo: GitRepo) -> None:
    head = repo.head_sha()
    outcome = repo.sync_to_remote("main")
    assert (outcome.old_sha, outcome.new_sha, outcome.forced, outcome.changed) == (head, head, False, False)


def test_force_push_is_detected_and_working_copy_reset(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    editor = git_server.editor("vault")
    editor.write("ops/runbooks/deploy.md", "# Deploy\n\nversion two\n")
    editor.commit_and_push("v2")
    repo.sync_to_remote("main")
    abandoned = repo.head_sha()
    # Someone rewrites history: drop the last commit and push a different one over it.
    editor.reset_hard("HEAD~1")
    editor.write("web/notes/cdn.md", "# CDN\n")
    rewritten = editor.commit("different history")
    editor.push(force=True)
    (repo.workdir / "ops/runbooks/deploy.md").write_text("local edit that must not survive\n")

    outcome = repo.sync_to_remote("main")

    assert outcome == type(outcome)(abandoned, rewritten, True)
    assert repo.head_sha() == rewritten
    assert (repo.workdir / "ops/runbooks/deploy.md").read_text() == SEED["ops/runbooks/deploy.md"]
    assert sorted(repo.changes(abandoned, rewritten), key=lambda c: c.path) == [
        Change("modified", "ops/runbooks/deploy.md"),
        Change("added", "web/notes/cdn.md"),
    ]


def test_first_sync_into_an_empty_working_copy(tmp_path: Path, remote: str) -> None:
    repo = GitRepo(tmp_path / "fresh")
    repo.init("main")
    repo.set_remote(remote)
    repo.set_remote(remote)  # idempotent
    outcome = repo.sync_to_remote("main")
    assert outcome.old_sha is None and outcome.forced is False
    added = repo.changes(None, outcome.new_sha)
    assert {c.path for c in added} == set(SEED)
    assert {c.kind for c in added} == {"added"}


def test_show_reads_a_file_at_an_older_commit(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    first = repo.head_sha()
    assert first is not None
    editor = git_server.editor("vault")
    editor.write("ops/runbooks/deploy.md", "changed\n")
    editor.commit_and_push("change")
    repo.sync_to_remote("main")
    assert repo.show(first, "ops/runbooks/deploy.md") == SEED["ops/runbooks/deploy.md"].encode()
    assert repo.show(repo.head_sha() or "", "ops/runbooks/deploy.md") == b"changed\n"
    with pytest.raises(GitObjectMissing):
        repo.show(first, "ops/runbooks/missing.md")
    with pytest.raises(GitError, match="over the 5 limit"):
        repo.show(first, "ops/runbooks/deploy.md", max_bytes=5)
    with pytest.raises(GitError, match="not a commit id"):
        repo.show("--output=/tmp/x", "ops/runbooks/deploy.md")


def test_last_commit_and_batched_variant_agree(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    seed_sha = repo.head_sha()
    editor = git_server.editor("vault")
    editor.write("ops/runbooks/deploy.md", "# Deploy\n\nnew text\n")
    edit_sha = editor.commit_and_push("Edit deploy\n\nWith a body line.")
    repo.sync_to_remote("main")

    single = repo.last_commit("ops/runbooks/deploy.md")
    assert single is not None
    assert single.sha == edit_sha
    assert single.author == "Remote Editor" and single.author_email == "editor@example.test"
    assert single.message == "Edit deploy\n\nWith a body line."
    assert single.date.tzinfo is not None
    assert repo.last_commit("ops/nothing-here.md") is None

    batch = repo.last_commits("ops")
    assert set(batch) == {"ops/runbooks/deploy.md", "ops/runbooks/rollback.md", "ops/skills/triage.md"}
    assert batch["ops/runbooks/deploy.md"].sha == edit_sha
    assert batch["ops/runbooks/deploy.md"].message == "Edit deploy"  # subject only in the batch
    assert batch["ops/runbooks/rollback.md"].sha == seed_sha
    for path, info in batch.items():
        assert info.sha == (repo.last_commit(path) or info).sha
    assert set(repo.last_commits()) == set(SEED)
    assert repo.last_commits("nope") == {}


def test_commit_branch_and_push_round_trip(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    repo.create_branch("memory/update-deploy")
    (repo.workdir / "ops/runbooks/deploy.md").write_text("# Deploy\n\nUpdated by an agent.\n")
    (repo.workdir / "ops/runbooks/rollback.md").unlink()
    (repo.workdir / "ops/unrelated.md").write_text("not part of this commit\n")
    sha = repo.commit_paths(
        ["ops/runbooks/deploy.md", "ops/runbooks/rollback.md"],
        "Update deploy, retire rollback",
        author_name="Ada Agent",
        author_email="ada@example.test",
    )
    assert sha is not None and sha == repo.head_sha()
    repo.push("memory/update-deploy")

    assert git_server.branch_sha("vault", "memory/update-deploy") == sha
    assert git_server.branch_sha("vault", "main") != sha
    info = repo.last_commit("ops/runbooks/deploy.md")
    assert info is not None and (info.author, info.author_email) == ("Ada Agent", "ada@example.test")
    assert "ops/unrelated.md" not in repo.ls_files("ops")
    assert repo.changes(repo.remote_sha("main"), sha) == [
        Change("modified", "ops/runbooks/deploy.md"),
        Change("deleted", "ops/runbooks/rollback.md"),
    ]
    # Same content again: nothing to commit.
    assert repo.commit_paths(["ops/runbooks/deploy.md"], "again", author_name="A", author_email="a@x") is None


def test_push_to_a_moved_remote_fails_with_a_clear_error(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    editor = git_server.editor("vault")
    editor.write("x/a.md", "a\n")
    editor.commit_and_push("remote moved on")
    (repo.workdir / "ops/runbooks/deploy.md").write_text("local\n")
    repo.commit_paths(["ops/runbooks/deploy.md"], "local", author_name="A", author_email="a@x")
    with pytest.raises(GitError, match=r"git push failed.*rejected"):
        repo.push("main")


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"author_name": "Eve <evil@x>", "author_email": "e@x"}, "author name"),
        ({"author_name": "Eve", "author_email": "e@x>\nInjected"}, "author email"),
        ({"author_name": "", "author_email": "e@x"}, "author name"),
    ],
)
def test_commit_refuses_bad_identities(local_repo: GitRepo, kwargs: dict[str, str], reason: str) -> None:
    with pytest.raises(GitError, match=reason):
        local_repo.commit_paths(["ops/a.md"], "msg", **kwargs)
    assert local_repo.head_sha() is None


def test_commit_in_a_repository_without_history(local_repo: GitRepo) -> None:
    sha = local_repo.commit_paths(["ops/a.md"], "first", author_name="A", author_email="a@x")
    assert sha is not None and local_repo.ls_files() == ["ops/a.md"]
    assert local_repo.changes(None, sha) == [Change("added", "ops/a.md")]
    with pytest.raises(GitError, match="message is empty"):
        local_repo.commit_paths(["ops/a.md"], "  ", author_name="A", author_email="a@x")


@pytest.mark.parametrize("name", ["", "-delete", "a..b", "a b", "x.lock", "/abs", "a//b", "a~1", "a:b"])
def test_bad_branch_names_are_refused(local_repo: GitRepo, name: str) -> None:
    with pytest.raises(GitError, match="invalid branch name"):
        local_repo.create_branch(name)


def test_missing_remote_repository_gives_git_error(git_server: GitServer, tmp_path: Path) -> None:  # noqa: F811
    repo = GitRepo(tmp_path / "x", timeout=30)
    with pytest.raises(GitError, match="git clone failed"):
        repo.clone(git_server.url("does-not-exist"), "main")


def test_clone_refuses_a_non_empty_folder(tmp_path: Path, remote: str) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with pytest.raises(GitError, match="not empty"):
        GitRepo(tmp_path / "busy").clone(remote, "main")


def test_authenticated_remote_and_no_secret_in_errors(make_git_server, tmp_path: Path) -> None:  # noqa: F811
    server: GitServer = make_git_server(required_token="s3cret-token")
    server.create_repo("private", files={"p/a.md": "# A\n"})

    anonymous = GitRepo(tmp_path / "anon", timeout=30)
    with pytest.raises(GitError) as refused:
        anonymous.clone(server.url("private"), "main")
    assert "git clone failed" in str(refused.value)

    wrong = GitRepo(tmp_path / "wrong", timeout=30)
    with pytest.raises(GitError) as leaked:
        wrong.clone(server.url("private", token="wrong-but-secret"), "main")
    assert "wrong-but-secret" not in str(leaked.value)

    header = GitRepo(tmp_path / "ok", timeout=30, auth_header="Authorization: token s3cret-token")
    header.clone(server.url("private"), "main")
    assert header.ls_files() == ["p/a.md"]
    assert "s3cret-token" not in (tmp_path / "ok/.git/config").read_text()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP port that accepts connections and never answers: git must give up on its own."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/vault.git"
    stop.set()
    thread.join(timeout=5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_timeout_kills_a_hanging_git(tmp_path: Path, silent_server: str) -> None:
    repo = GitRepo(tmp_path / "hang", timeout=1.5)
    with pytest.raises(GitError, match="timed out after 1.5s"):
        repo.clone(silent_server, "main")


def test_redact_scrubs_credentials() -> None:
    assert redact("fatal: unable to access 'https://bot:tok3n@forge/x.git/'") == (
        "fatal: unable to access 'https://***@forge/x.git/'"
    )
    assert "abc123" not in redact("http.extraHeader=Authorization: token abc123")
    assert "abc123" not in redact("Authorization: Bearer abc123")


def test_sync_from_a_proposal_branch_returns_to_the_default_branch(git_server: GitServer, repo: GitRepo) -> None:  # noqa: F811
    main_before = repo.head_sha()
    repo.create_branch("memory/proposal")
    (repo.workdir / "ops/runbooks/deploy.md").write_text("proposal\n")
    repo.commit_paths(["ops/runbooks/deploy.md"], "proposal", author_name="A", author_email="a@x")
    editor = git_server.editor("vault")
    editor.write("ops/runbooks/deploy.md", "# Deploy\n\nfrom main\n")
    pushed = editor.commit_and_push("main moves")

    outcome = repo.sync_to_remote("main")

    assert (outcome.old_sha, outcome.new_sha, outcome.forced) == (main_before, pushed, False)
    assert (repo.workdir / "ops/runbooks/deploy.md").read_text() == "# Deploy\n\nfrom main\n"
    assert repo.sync_to_remote("main").changed is False


def test_missing_working_copy_and_missing_git_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="does not exist"):
        GitRepo(tmp_path / "nowhere").head_sha()
    (tmp_path / "here").mkdir()
    with pytest.raises(GitError, match="cannot run git"):
        GitRepo(tmp_path / "here", git_binary=str(tmp_path / "no-git")).head_sha()
