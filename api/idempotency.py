"""``Idempotency-Key`` for every POST that creates work: the first response is recorded and replayed.

Semantics (per principal, for ``MEM_IDEMPOTENCY_TTL_SECS``, 24 hours by default):

- same key, same request (method, path, query and JSON body, compared canonically) -> the original
  response again: status, body and ``Location``, with ``Idempotent-Replayed: true``;
- same key, different request -> 422;
- same key while the first request is still running -> the second waits briefly for the first, then
  answers 409 with ``Retry-After`` (it never runs the work a second time);
- only successful (2xx) responses are recorded: a request that failed may be retried with its key.

Concurrency: the claim is one ``INSERT ... ON CONFLICT DO NOTHING`` on the ``idempotency_keys`` primary key
``(principal, key)``, so of any number of simultaneous requests exactly one runs the view, in one API
process or many. A claim whose owner died mid-request (process killed) is taken over after
:data:`STALE_CLAIM_SECS`.

Jobs keep their own ``(submitted_by, idempotency_key)`` unique constraint as well: this module replays the
HTTP response, the job store guarantees one job even if a record has expired. Both use the same key and
the same principal, so they agree.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from flask import Response, current_app, request
from sqlalchemy import and_, delete, func, or_, update
from sqlalchemy.dialects.postgresql import insert

from api.problems import Problem
from shared.config import Settings
from shared.db.engine import session_scope
from shared.db.models import IdempotencyRecord

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 200
# status_code of a claim whose request is still running (a real response never has status 0).
PENDING = 0
# A pending claim older than this belongs to a request that died; the next request with the key takes over.
STALE_CLAIM_SECS = 120
# How long a duplicate waits for the first request to finish before answering 409.
WAIT_FOR_FIRST_SECS = 10.0
# Response headers worth replaying (the body and status are always replayed).
REPLAYED_HEADERS = ("Location", "Content-Type")


def idempotency_key() -> str | None:
    """The request's ``Idempotency-Key``: 1-200 visible ASCII characters, or ``None`` when absent; 400 if bad."""
    key = request.headers.get(HEADER)
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_KEY_CHARS or not all("\x21" <= ch <= "\x7e" for ch in key):
        raise Problem(400, f"{HEADER} must be 1-{MAX_KEY_CHARS} visible ASCII characters (no spaces or unicode)")
    return key


def request_fingerprint() -> str:
    """sha256 of what makes two requests "the same": method, path, sorted query and canonical JSON body."""
    raw = request.get_data(cache=True)
    try:
        body: Any = json.loads(raw) if raw else None
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except ValueError:  # not JSON (the endpoint has already refused that), compare bytes
        canonical = raw
    query = sorted((k, v) for k in request.args for v in request.args.getlist(k))
    head = json.dumps([request.method, request.path, query], ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(head + b"\n" + canonical).hexdigest()


def _ttl() -> timedelta:
    settings: Settings = current_app.config["SETTINGS"]
    return timedelta(seconds=settings.idempotency_ttl_secs)


def _claim(principal: str, key: str, fingerprint: str) -> IdempotencyRecord | None:
    """Try to own ``(principal, key)``; ``None`` when we do, else the existing record (detached)."""
    with session_scope() as session:
        now = func.now()
        # Expired records (and abandoned claims) of this principal go first; the primary key starts
        # with the principal, so this is an index range scan, and keeps the table bounded.
        session.execute(delete(IdempotencyRecord).where(
            IdempotencyRecord.principal == principal,
            or_(IdempotencyRecord.created_at < now - _ttl(),
                and_(IdempotencyRecord.status_code == PENDING,
                     IdempotencyRecord.created_at < now - timedelta(seconds=STALE_CLAIM_SECS))),
        ))
        inserted = session.execute(
            insert(IdempotencyRecord)
            .values(principal=principal, key=key, request_sha=fingerprint, status_code=PENDING, body={},
                    headers={})
            .on_conflict_do_nothing(index_elements=["principal", "key"])
            .returning(IdempotencyRecord.key)
        ).first()
        if inserted is not None:
            return None
        existing = session.get(IdempotencyRecord, (principal, key))
        if existing is None:  # deleted between our insert and read: the caller simply tries again
            return IdempotencyRecord(principal=principal, key=key, request_sha=fingerprint, status_code=-1,
                                     body={}, headers={})
        session.expunge(existing)
        return existing


def _release(principal: str, key: str) -> None:
    with session_scope() as session:
        session.execute(delete(IdempotencyRecord).where(
            IdempotencyRecord.principal == principal, IdempotencyRecord.key == key,
            IdempotencyRecord.status_code == PENDING))


def _record(principal: str, key: str, response: Response) -> None:
    if not (200 <= response.status_code < 300) or not response.is_json or response.is_streamed:
        _release(principal, key)
        return
    headers = {name: response.headers[name] for name in REPLAYED_HEADERS if name in response.headers}
    # The body is kept as text inside the JSONB column: JSONB would reorder keys, and a replay should be
    # byte-for-byte the first answer.
    text = response.get_data(as_text=True)
    with session_scope() as session:
        session.execute(update(IdempotencyRecord).where(
            IdempotencyRecord.principal == principal, IdempotencyRecord.key == key,
        ).values(status_code=response.status_code, body={"text": text}, headers=headers))


def _replay(record: IdempotencyRecord) -> Response:
    headers = dict(record.headers or {})
    headers.setdefault("Content-Type", "application/json")
    response = Response(record.body.get("text", ""), status=record.status_code, headers=headers)
    response.headers["Idempotent-Replayed"] = "true"
    return response


def run_idempotent(principal: str, view: Callable[[], Any]) -> Response:
    """Run ``view`` under the request's ``Idempotency-Key`` (or plainly, without one)."""
    key = idempotency_key()
    if key is None:
        return current_app.make_response(view())
    fingerprint = request_fingerprint()
    deadline = time.monotonic() + WAIT_FOR_FIRST_SECS
    while True:
        existing = _claim(principal, key, fingerprint)
        if existing is None:
            break
        if existing.request_sha != fingerprint:
            raise Problem(422, f"this {HEADER} was already used with a different request; use a new key")
        if existing.status_code > PENDING:
            return _replay(existing)
        if time.monotonic() >= deadline:
            raise Problem(409, f"a request with this {HEADER} is still being processed; retry shortly",
                          headers={"Retry-After": "1"})
        # Production wait for another request to finish (bounded by the deadline above); polling the row
        # is simpler than LISTEN/NOTIFY and duplicates are rare.
        time.sleep(0.05)
    try:
        response = current_app.make_response(view())
    except BaseException:
        _release(principal, key)
        raise
    _record(principal, key, response)
    return response
