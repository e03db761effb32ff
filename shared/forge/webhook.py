"""Forgejo/Gitea webhooks: check the HMAC signature, then decide whether the vault must sync.

Payload fields follow Forgejo's (Gitea-compatible) documented webhook payloads: a ``push`` event
carries ``ref``, ``before``, ``after``, ``commits`` and ``repository.default_branch``; a
``pull_request`` event carries ``action`` and ``pull_request.{merged, merge_commit_sha, base.ref}``.
The event name comes from ``X-Forgejo-Event`` (``X-Gitea-Event``, ``X-GitHub-Event`` as fallbacks)
and the delivery id from the matching ``*-Delivery`` header.

Note: merging a pull request also produces a ``push`` to the base branch, so one merge usually
yields two "sync" decisions; syncing is idempotent (the second finds nothing new) and callers
can also de-duplicate on ``after_sha``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SIGNATURE_HEADERS = ("X-Forgejo-Signature", "X-Gitea-Signature", "X-Hub-Signature-256")
EVENT_HEADERS = ("X-Forgejo-Event", "X-Gitea-Event", "X-GitHub-Event")
DELIVERY_HEADERS = ("X-Forgejo-Delivery", "X-Gitea-Delivery", "X-GitHub-Delivery")
MAX_PAYLOAD_BYTES = 5 * 1024 * 1024
ZERO_SHA = re.compile(r"^0+$")


class WebhookPayloadError(ValueError):
    """The webhook body is not a usable JSON object; ``str(exc)`` is safe to return to the sender."""


@dataclass(frozen=True)
class WebhookDecision:
    """What to do with one delivery."""

    should_sync: bool
    reason: str
    delivery_id: str | None
    event: str
    after_sha: str | None  # the commit the default branch now points at, when known


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive header lookup that works for dicts as well as werkzeug/requests headers."""
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, item in headers.items():
        if key.lower() == lowered:
            return item
    return None


def _first_header(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = _header(headers, name)
        if value:
            return value.strip()
    return None


def verify_signature(secret: str, body: bytes, headers: Mapping[str, str]) -> bool:
    """True when the body's HMAC-SHA256 (hex, keyed with ``secret``) matches the signature headers.

    Forgejo sends ``X-Forgejo-Signature`` and ``X-Gitea-Signature`` (bare hex) and, in newer
    versions, ``X-Hub-Signature-256`` (``sha256=<hex>``). Every signature header present must
    match, and at least one must be present. An empty secret never verifies: an unconfigured
    secret must not turn into "accept anything".
    """
    if not secret or not isinstance(body, bytes | bytearray):
        return False
    expected = hmac.new(secret.encode("utf-8"), bytes(body), hashlib.sha256).hexdigest().encode("ascii")
    seen = False
    for name in SIGNATURE_HEADERS:
        value = _header(headers, name)
        if value is None:
            continue
        seen = True
        given = value.strip().lower().removeprefix("sha256=")
        # compare_digest needs equal types; non-ASCII header text simply cannot match.
        if not hmac.compare_digest(given.encode("utf-8", "replace"), expected):
            return False
    return seen


def parse_payload(body: bytes, *, max_bytes: int = MAX_PAYLOAD_BYTES) -> dict[str, Any]:
    """Decode a webhook body into a JSON object, or raise :class:`WebhookPayloadError`."""
    if len(body) > max_bytes:
        raise WebhookPayloadError(f"payload larger than {max_bytes} bytes")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookPayloadError("payload is not valid JSON") from None
    except RecursionError:  # "[[[[..." nested deeper than the parser's stack
        raise WebhookPayloadError("payload is nested too deeply") from None
    if not isinstance(payload, dict):
        raise WebhookPayloadError("payload is not a JSON object")
    return payload


def _sha_or_none(value: Any) -> str | None:
    if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}", value):
        return value.lower()
    return None


def classify_event(headers: Mapping[str, str], payload: Mapping[str, Any], default_branch: str) -> WebhookDecision:
    """Decide whether a (verified) delivery means the default branch changed.

    Syncs on a ``push`` to ``refs/heads/<default_branch>`` and on a ``pull_request`` closed as
    merged into the default branch; everything else is ignored with a reason. When
    ``default_branch`` is empty, the payload's ``repository.default_branch`` is used.
    """
    event = (_first_header(headers, EVENT_HEADERS) or "").lower()
    delivery = _first_header(headers, DELIVERY_HEADERS)

    def decide(sync: bool, reason: str, after: str | None = None) -> WebhookDecision:
        return WebhookDecision(sync, reason, delivery, event, after)

    if not event:
        return decide(False, "no X-Forgejo-Event header")
    if not isinstance(payload, Mapping):
        return decide(False, "payload is not a JSON object")
    repository = payload.get("repository")
    branch = default_branch or (repository.get("default_branch") if isinstance(repository, Mapping) else "") or ""
    if not isinstance(branch, str) or not branch:
        return decide(False, "default branch unknown")

    if event == "push":
        ref = payload.get("ref")
        if not isinstance(ref, str):
            return decide(False, "push payload has no ref")
        if ref != f"refs/heads/{branch}":
            return decide(False, f"push to {ref}, not to the default branch {branch}")
        after = payload.get("after")
        if isinstance(after, str) and ZERO_SHA.match(after):
            return decide(False, f"default branch {branch} was deleted")
        return decide(True, f"push to {branch}", _sha_or_none(after))

    if event == "pull_request":
        action = payload.get("action")
        pull = payload.get("pull_request")
        if not isinstance(pull, Mapping):
            return decide(False, "pull_request payload has no pull_request object")
        if action != "closed":
            return decide(False, f"pull request {action or 'event'}, not closed")
        if pull.get("merged") is not True:
            return decide(False, "pull request closed without merging")
        base = pull.get("base")
        base_ref = base.get("ref") if isinstance(base, Mapping) else None
        if base_ref != branch:
            return decide(False, f"pull request merged into {base_ref}, not the default branch {branch}")
        return decide(True, f"pull request merged into {branch}", _sha_or_none(pull.get("merge_commit_sha")))

    return decide(False, f"event {event!r} does not change the vault")
