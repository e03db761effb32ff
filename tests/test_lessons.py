"""Lessons: the store, the HTTP endpoints (with project isolation) and ``mem sig explain``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

NPM_LOG = """$ npm ci
npm WARN config production Use `--omit=dev` instead.
npm ERR! code ERESOLVE
npm ERR! ERESOLVE unable to resolve dependency tree
npm ERR! Found: react@17.0.2
The command "npm ci" exited with 1.
"""
# The same failure on another day: other timestamps and versions, the same signature.
NPM_LOG_AGAIN = NPM_LOG.replace("17.0.2", "17.0.3")


def _post(client, headers, **body):  # type: ignore[no-untyped-def]
    return client.post("/memory/lessons", json=body, headers=headers)


def _lesson(project: str, **extra: object) -> dict[str, object]:
    return {"project": project, "tool": "npm", "title": "Peer dependency conflict",
            "solution": "Upgrade react to 18 or pin react-table 7.", **extra}


# --- the store -------------------------------------------------------------------------------------------


def test_keys_from_log_symptom_and_sha(database):  # type: ignore[no-untyped-def]
    from shared.diagnosis import extract_signature, project_symptom
    from shared.diagnosis.lessons import LessonError, lesson_keys

    sig = extract_signature(NPM_LOG, "auto")
    keys = lesson_keys("auto", log=NPM_LOG)
    assert keys.tool == "npm" and keys.sig_sha == sig.sig_sha
    assert keys.sym_sha == project_symptom("npm", sig.normalised or "").sym_sha
    typed = lesson_keys("npm", symptom="unable to resolve dependency")
    assert typed.sig_sha is None and typed.sym_sha == project_symptom("npm", "unable to resolve dependency").sym_sha
    with pytest.raises(LessonError, match="either log or sig_sha"):
        lesson_keys("npm", log=NPM_LOG, sig_sha="a" * 64)
    with pytest.raises(LessonError, match="found by"):
        lesson_keys("npm")
    with pytest.raises(LessonError, match="no recognisable error"):
        lesson_keys("npm", log="all good\nbuild passed\n")
    with pytest.raises(LessonError, match="tool 'auto'"):
        lesson_keys("auto", symptom="disk full")
    with pytest.raises(LessonError, match="64 hexadecimal"):
        lesson_keys("npm", sig_sha="xyz")


def test_record_dedupes_and_counts_outcomes(database, project_name):  # type: ignore[no-untyped-def]
    from shared.db.engine import session_scope
    from shared.diagnosis.lessons import (
        LessonNotFound,
        lesson_keys,
        list_lessons,
        record_lesson,
        record_outcome,
    )

    keys = lesson_keys("npm", log=NPM_LOG)
    with session_scope() as session:
        first, created = record_lesson(session, project=project_name, keys=keys, title="t", solution="fix it")
        again, created_again = record_lesson(session, project=project_name, keys=keys, title="t2", solution="fix it")
        other, _ = record_lesson(session, project=project_name, keys=keys, title="t3", solution="another fix")
    assert created and not created_again and again.id == first.id and other.id != first.id
    with session_scope() as session:
        record_outcome(session, other.id, True, [project_name])
        record_outcome(session, other.id, True, [project_name])
        view = record_outcome(session, first.id, False, [project_name])
        assert (view.success_count, view.failure_count, view.success_rate) == (0, 1, 0.0)
        with pytest.raises(LessonNotFound):
            record_outcome(session, first.id, True, ["someone-else"])
        ranked = list_lessons(session, [project_name], sig_sha=keys.sig_sha)
    # The fix that worked twice ranks above the one that failed.
    assert [v.id for v in ranked] == [other.id, first.id]
    assert ranked[0].success_rate == 1.0 and ranked[0].match == "sig_sha"


def test_find_by_keywords_when_no_key_matches_exactly(database, project_name):  # type: ignore[no-untyped-def]
    from shared.db.engine import session_scope
    from shared.diagnosis.lessons import find_lessons, lesson_keys, record_lesson

    with session_scope() as session:
        view, _ = record_lesson(session, project=project_name, keys=lesson_keys("npm", log=NPM_LOG), title="t",
                                solution="pin it")
        found = find_lessons(session, [project_name], tool="npm", text="unable to resolve dependency")
        assert [(v.id, v.match) for v in found] == [(view.id, "keywords")]
        # One shared keyword is not enough, and another tool's lessons never match.
        assert find_lessons(session, [project_name], tool="npm", text="dependency") == []
        assert find_lessons(session, [project_name], tool="cargo", text="unable to resolve dependency tree") == []
        # The same failure on another day: the exact signature.
        sig = lesson_keys("npm", log=NPM_LOG_AGAIN).sig_sha
        assert [v.match for v in find_lessons(session, [project_name], tool="npm", sig_sha=sig)] == ["sig_sha"]


# --- HTTP ------------------------------------------------------------------------------------------------


def test_post_lesson_from_log_then_find_it_by_sig_sha(client, admin_headers, project_name):  # type: ignore[no-untyped-def]
    r = _post(client, admin_headers, **_lesson(project_name, log=NPM_LOG, source="https://forge/pr/12"))
    assert r.status_code == 201, r.get_json()
    lesson = r.get_json()
    assert lesson["tool"] == "npm" and len(lesson["sig_sha"]) == 64 and lesson["sym_sha"]
    assert r.headers["Location"].endswith(f"/memory/lessons/{lesson['id']}")
    assert _post(client, admin_headers, **_lesson(project_name, log=NPM_LOG_AGAIN)).status_code == 200  # same lesson

    # Other tests record the same failure in their own projects: an admin sees them all, so filter.
    found = client.get("/memory/lessons", query_string={"sig_sha": lesson["sig_sha"], "project": project_name},
                       headers=admin_headers).get_json()
    assert found["count"] == 1 and found["lessons"][0]["id"] == lesson["id"]
    by_sym = client.get("/memory/lessons", query_string={"sym_sha": lesson["sym_sha"], "project": project_name,
                                                         "tool": "npm"}, headers=admin_headers).get_json()
    assert [x["id"] for x in by_sym["lessons"]] == [lesson["id"]]

    out = client.post(f"/memory/lessons/{lesson['id']}/outcome", json={"worked": True}, headers=admin_headers)
    assert out.status_code == 200 and out.get_json()["success_count"] == 1
    out = client.post(f"/memory/lessons/{lesson['id']}/outcome", json={"worked": False}, headers=admin_headers)
    assert out.get_json()["success_rate"] == 0.5


def test_outcome_with_idempotency_key_counts_once(client, admin_headers, project_name):  # type: ignore[no-untyped-def]
    lesson = _post(client, admin_headers, **_lesson(project_name, symptom="disk quota exceeded")).get_json()
    headers = {**admin_headers, "Idempotency-Key": f"outcome-{project_name}"}
    for _ in range(2):
        r = client.post(f"/memory/lessons/{lesson['id']}/outcome", json={"worked": True}, headers=headers)
        assert r.status_code == 200
    shown = client.get(f"/memory/lessons/{lesson['id']}", headers=admin_headers).get_json()
    assert shown["success_count"] == 1


def test_project_isolation(client, make_key, admin_headers, project_name):  # type: ignore[no-untyped-def]
    hidden = _post(client, admin_headers, **_lesson(project_name, symptom="out of memory in webpack")).get_json()
    other = f"{project_name}-other"
    mine = _post(client, admin_headers, **_lesson(other, symptom="out of memory in webpack")).get_json()
    assert hidden["sym_sha"] == mine["sym_sha"]
    headers = {"Authorization": f"Bearer {make_key(caps=['memory:write'], projects=[other])}"}

    listed = client.get("/memory/lessons", query_string={"sym_sha": mine["sym_sha"]}, headers=headers).get_json()
    assert [x["id"] for x in listed["lessons"]] == [mine["id"]]
    for path in (f"/memory/lessons/{hidden['id']}", f"/memory/lessons/{hidden['id'] + 10**9}"):
        r = client.get(path, headers=headers)
        assert r.status_code == 404 and r.get_json()["detail"].startswith("no lesson")
    r = client.post(f"/memory/lessons/{hidden['id']}/outcome", json={"worked": True}, headers=headers)
    assert r.status_code == 404
    assert client.get("/memory/lessons", query_string={"project": project_name}, headers=headers).status_code == 403
    assert _post(client, headers, **_lesson(project_name, symptom="x y z")).status_code == 403
    # Nothing leaked into the hidden lesson's counts.
    assert client.get(f"/memory/lessons/{hidden['id']}", headers=admin_headers).get_json()["success_count"] == 0


def test_bad_lesson_requests(client, admin_headers, project_name):  # type: ignore[no-untyped-def]
    cases = [
        (_lesson(project_name, tool="frobnicator", symptom="x"), "known tools"),
        (_lesson(project_name), "found by"),
        (_lesson(project_name, log="   "), "empty"),
        (_lesson(project_name, log=NPM_LOG, sig_sha="a" * 64), "not both"),
        (_lesson(project_name, sig_sha="nothex"), "sig_sha"),
        (_lesson(project_name, log="everything passed\n"), "no recognisable error"),
        (_lesson(project_name, log_base64="***", symptom="x"), "base64"),
        ({**_lesson(project_name, symptom="x"), "extra": 1}, "extra"),
    ]
    for body, words in cases:
        r = _post(client, admin_headers, **body)
        assert r.status_code == 400, (body, r.get_json())
        assert words in json.dumps(r.get_json()), r.get_json()
    r = _post(client, admin_headers, **_lesson(project_name, tool="frobnicator", symptom="x"))
    assert "npm" in r.get_json()["known_tools"]
    r = client.post("/memory/lessons/1/outcome", json={"worked": "yes"}, headers=admin_headers)
    assert r.status_code == 400
    assert client.get(f"/memory/lessons/{2**70}", headers=admin_headers).status_code == 404


def test_binary_log_as_base64_is_decoded_with_replacement(client, admin_headers, project_name):  # type: ignore[no-untyped-def]
    import base64

    raw = b"\xff\xfe\x00garbage\n" + NPM_LOG.encode() + b"\x80\x81 trailing bytes\n"
    r = _post(client, admin_headers, **_lesson(project_name, log_base64=base64.b64encode(raw).decode()))
    assert r.status_code == 201, r.get_json()
    from shared.diagnosis import extract_signature

    assert r.get_json()["sig_sha"] == extract_signature(NPM_LOG, "auto").sig_sha


# --- mem sig explain -------------------------------------------------------------------------------------


def test_explain_by_sig_sha_and_by_query(database, project_name):  # type: ignore[no-untyped-def]
    from cli.lessons import explain
    from shared.db.engine import session_scope
    from shared.diagnosis.lessons import lesson_keys, record_lesson

    keys = lesson_keys("npm", log=NPM_LOG)
    with session_scope() as session:
        record_lesson(session, project=project_name, keys=keys, title="Peer deps", solution="use --legacy-peer-deps",
                      source="runbooks/npm.md")
    runner = CliRunner()
    result = runner.invoke(explain, ["--sig-sha", keys.sig_sha or "", "--project", project_name])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["found"] and answer["count"] == 1 and answer["sig_sha"] == keys.sig_sha
    solution = answer["solutions"][0]
    assert solution["solution"] == "use --legacy-peer-deps" and solution["source"] == "runbooks/npm.md"
    assert solution["success_rate"] is None and solution["timestamp"]

    result = runner.invoke(explain, ["--tool", "npm", "--query", "unable to resolve dependency", "--project", project_name])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["solutions"][0]["match"] == "keywords"

    result = runner.invoke(explain, ["--sig-sha", "0" * 64, "--project", project_name])
    assert result.exit_code == 1 and json.loads(result.output) == {
        "found": False, "sig_sha": "0" * 64, "sym_sha": None, "count": 0, "solutions": []}
    for argv, words in ((["--tool", "nope", "--query", "x"], "unknown tool"), (["--sig-sha", "zz"], "64 hexadecimal"),
                        ([], "--sig-sha"), (["--query", "disk full"], "needs a tool")):
        result = runner.invoke(explain, argv)
        assert result.exit_code == 2 and words in result.output, (argv, result.output)
