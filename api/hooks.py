"""``POST /memory/hooks/forgejo``: a signed Forgejo/Gitea webhook asks for a vault sync.

No bearer token: the HMAC-SHA256 of the raw body, keyed with ``MEM_WEBHOOK_SECRET``, is the credential.
The answer is fast: the delivery is recorded (deduplicated by ``X-Forgejo-Delivery``) and at most one sync
job is queued; the job does the work.
"""

from __future__ import annotations

import logging

from flask import Blueprint, current_app, jsonify, request

from api.contract import endpoint
from api.problems import Problem
from api.vault_schemas import WebhookOut
from shared.config import Settings
from shared.db.engine import session_scope
from shared.forge.webhook import WebhookPayloadError, classify_event, parse_payload, verify_signature
from shared.jobs.broker import dispatch
from shared.vault.sync import SYNC_STEP, receive_delivery

bp = Blueprint("hooks", __name__, url_prefix="/memory")
log = logging.getLogger(__name__)


@endpoint(bp, "/hooks/forgejo", "POST", summary="Forgejo/Gitea webhook: a merge or push to the vault branch syncs",
          capability=None, raw_body=True,
          responses={202: ("sync queued, or delivery ignored with a reason", WebhookOut),
                     200: ("delivery already received", WebhookOut)})
def forgejo():  # type: ignore[no-untyped-def]
    """Verify the signature, then queue one sync for a push or merged pull request on the vault branch."""
    settings: Settings = current_app.config["SETTINGS"]
    if not settings.webhook_secret:
        raise Problem(503, "webhooks are not configured on this server (MEM_WEBHOOK_SECRET is not set)")
    body = request.get_data(cache=False)
    if not verify_signature(settings.webhook_secret, body, request.headers):
        log.warning("webhook refused: missing or invalid signature", extra={"remote": request.remote_addr})
        raise Problem(401, "missing or invalid webhook signature (X-Forgejo-Signature: hex HMAC-SHA256 of the body)")
    try:
        payload = parse_payload(body)
    except WebhookPayloadError as exc:
        raise Problem(400, str(exc)) from None
    decision = classify_event(request.headers, payload, settings.vault_branch)
    repository = payload.get("repository")
    full_name = repository.get("full_name") if isinstance(repository, dict) else None
    with session_scope() as session:
        outcome = receive_delivery(
            session, decision, settings=settings, repository=full_name if isinstance(full_name, str) else None
        )
    if outcome.created and outcome.job_id:
        dispatch(SYNC_STEP, outcome.job_id)
    log.info("webhook", extra={"event": decision.event, "status": outcome.status, "reason": outcome.reason})
    response = jsonify(outcome.to_dict(decision.delivery_id))
    response.status_code = 200 if outcome.status == "duplicate" else 202
    return response
