"""Webhook signature checks and the sync/ignore decision for Forgejo push and pull_request events."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from shared.forge.webhook import WebhookPayloadError, classify_event, parse_payload, verify_signature

SECRET = "hook-secret-for-tests"
AFTER = "a" * 40
MERGE = "b" * 40


def sign(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def push_payload(ref: str = "refs/heads/main", after: str = AFTER) -> dict[str, Any]:
    """Shaped like Forgejo's documented push payload (only the fields we read, plus a few more)."""
    return {
        "ref": ref,
        "before": "c" * 40,
        "after": after,
        "compare_url": "https://forge.example/team/vault/compare/ccc...aaa",
        "commits": [{"id": after, "message": "Update runbook", "added": [], "removed": [], "modified": ["ops/a.md"]}],
        "total_commits": 1,
        "repository": {"id": 7, "full_name": "team/vault", "default_branch": "main"},
        "pusher": {"login": "ada"},
        "sender": {"login": "ada"},
    }


def pull_payload(action: str = "closed", merged: bool = True, base: str = "main") -> dict[str, Any]:
    """Shaped like Forgejo's documented pull_request payload."""
    return {
        "action": action,
        "number": 3,
        "pull_request": {
            "id": 103,
            "number": 3,
            "state": "closed" if action == "closed" else "open",
            "merged": merged,
            "merge_commit_sha": MERGE if merged else None,
            "base": {"ref": base, "sha": "d" * 40},
            "head": {"ref": "memory/proposal-3", "sha": "e" * 40},
        },
        "repository": {"id": 7, "full_name": "team/vault", "default_branch": "main"},
        "sender": {"login": "ada"},
    }


def headers(event: str, delivery: str = "d-1") -> dict[str, str]:
    return {"X-Forgejo-Event": event, "X-Forgejo-Delivery": delivery}


# --- signatures ----------------------------------------------------------------------------------

BODY = json.dumps(push_payload()).encode()


@pytest.mark.parametrize(
    "header_set",
    [
        {"X-Forgejo-Signature": sign(BODY)},
        {"X-Gitea-Signature": sign(BODY)},
        {"x-forgejo-signature": sign(BODY).upper()},  # header names and hex case do not matter
        {"X-Hub-Signature-256": "sha256=" + sign(BODY)},
        {"X-Forgejo-Signature": sign(BODY), "X-Gitea-Signature": sign(BODY), "X-Hub-Signature-256": "sha256=" + sign(BODY)},
    ],
)
def test_valid_signatures_verify(header_set: dict[str, str]) -> None:
    assert verify_signature(SECRET, BODY, header_set) is True


def test_missing_signature_header_is_refused() -> None:
    assert verify_signature(SECRET, BODY, {"X-Forgejo-Event": "push"}) is False


def test_wrong_secret_is_refused() -> None:
    assert verify_signature(SECRET, BODY, {"X-Forgejo-Signature": sign(BODY, "another-secret")}) is False


def test_forged_signature_is_refused() -> None:
    assert verify_signature(SECRET, BODY, {"X-Forgejo-Signature": "0" * 64}) is False
    assert verify_signature(SECRET, BODY, {"X-Forgejo-Signature": "not-hex-at-all"}) is False
    assert verify_signature(SECRET, BODY, {"X-Forgejo-Signature": ""}) is False
    assert verify_signature(SECRET, BODY, {"X-Forgejo-Signature": "sig\u00e9\u2603"}) is False
    # SHA-1 or MD5 of the body is not the HMAC.
    assert verify_signature(SECRET, BODY, {"X-Forgejo-Signature": hashlib.sha256(BODY).hexdigest()}) is False


def test_body_altered_by_one_byte_is_refused() -> None:
    signature = sign(BODY)
    altered = bytearray(BODY)
    altered[10] ^= 0x01
    assert verify_signature(SECRET, bytes(altered), {"X-Forgejo-Signature": signature}) is False
    assert verify_signature(SECRET, BODY + b" ", {"X-Forgejo-Signature": signature}) is False


def test_one_bad_header_among_good_ones_is_refused() -> None:
    mixed = {"X-Forgejo-Signature": sign(BODY), "X-Gitea-Signature": "0" * 64}
    assert verify_signature(SECRET, BODY, mixed) is False


def test_empty_secret_never_verifies() -> None:
    assert verify_signature("", BODY, {"X-Forgejo-Signature": hmac.new(b"", BODY, hashlib.sha256).hexdigest()}) is False


def test_headers_object_with_case_insensitive_get() -> None:
    from werkzeug.datastructures import Headers

    assert verify_signature(SECRET, BODY, Headers({"X-Gitea-Signature": sign(BODY)})) is True


# --- payload parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'"push"', "not a JSON object"),
        (b"{" * 100_000, "not valid JSON"),
        (b"[" * 100_000, "nested too deeply"),
    ],
)
def test_non_json_bodies_are_clear_errors(body: bytes, reason: str) -> None:
    with pytest.raises(WebhookPayloadError, match=reason):
        parse_payload(body)


def test_oversized_body_is_refused_before_parsing() -> None:
    with pytest.raises(WebhookPayloadError, match="larger than"):
        parse_payload(b" " * 101, max_bytes=100)


def test_signed_non_json_body_verifies_but_does_not_parse() -> None:
    body = b"<html>not a webhook</html>"
    assert verify_signature(SECRET, body, {"X-Forgejo-Signature": sign(body)}) is True
    with pytest.raises(WebhookPayloadError):
        parse_payload(body)


# --- classification ------------------------------------------------------------------------------


def test_push_to_default_branch_syncs() -> None:
    decision = classify_event(headers("push", "delivery-42"), push_payload(), "main")
    assert decision.should_sync is True
    assert (decision.event, decision.delivery_id, decision.after_sha) == ("push", "delivery-42", AFTER)


def test_merged_pull_request_into_default_branch_syncs() -> None:
    decision = classify_event(headers("pull_request"), pull_payload(), "main")
    assert decision.should_sync is True and decision.after_sha == MERGE
    assert "merged" in decision.reason


@pytest.mark.parametrize(
    ("event", "payload", "reason"),
    [
        ("push", push_payload(ref="refs/heads/feature"), "not to the default branch"),
        ("push", push_payload(ref="refs/tags/v1.0"), "not to the default branch"),
        ("push", push_payload(after="0" * 40), "deleted"),
        ("push", {"after": AFTER}, "no ref"),
        ("pull_request", pull_payload(action="opened", merged=False), "not closed"),
        ("pull_request", pull_payload(action="synchronized", merged=False), "not closed"),
        ("pull_request", pull_payload(merged=False), "without merging"),
        ("pull_request", pull_payload(base="release"), "not the default branch"),
        ("pull_request", {"action": "closed"}, "no pull_request object"),
        ("issues", {"action": "opened"}, "does not change the vault"),
        ("create", {"ref": "main", "ref_type": "branch"}, "does not change the vault"),
    ],
)
def test_other_events_are_ignored_with_a_reason(event: str, payload: dict[str, Any], reason: str) -> None:
    decision = classify_event(headers(event), payload, "main")
    assert decision.should_sync is False
    assert reason in decision.reason
    assert decision.event == event


def test_missing_event_header_is_ignored() -> None:
    decision = classify_event({}, push_payload(), "main")
    assert (decision.should_sync, decision.reason, decision.delivery_id) == (False, "no X-Forgejo-Event header", None)


def test_gitea_headers_and_payload_default_branch_fallback() -> None:
    gitea = {"X-Gitea-Event": "push", "X-Gitea-Delivery": "g-1"}
    payload = push_payload(ref="refs/heads/trunk")
    payload["repository"]["default_branch"] = "trunk"
    decision = classify_event(gitea, payload, "")
    assert decision.should_sync is True and decision.delivery_id == "g-1"
    assert classify_event(gitea, payload, "main").should_sync is False  # configured branch wins


def test_malformed_fields_do_not_crash() -> None:
    weird: dict[str, Any] = {"ref": ["refs/heads/main"], "after": 12, "repository": "x", "pull_request": "y"}
    assert classify_event(headers("push"), weird, "main").should_sync is False
    assert classify_event(headers("pull_request"), weird, "main").should_sync is False
    decision = classify_event(headers("push"), {"ref": "refs/heads/main", "after": "not-a-sha"}, "main")
    assert decision.should_sync is True and decision.after_sha is None
    assert classify_event(headers("push"), [], "main").should_sync is False  # type: ignore[arg-type]
