"""Rate limits per principal and endpoint, with flask-limiter.

Every endpoint declares a *rate class* in its contract (``api.contract.endpoint(rate_limit=...)``); the
class names a setting (``MEM_RATE_LIMIT_<CLASS>``) holding a limit such as ``100/hour``. The bucket is
``(principal subject, endpoint)``: one agent exhausting its query budget does not slow another, and a
principal's ingest budget is separate from its query budget.

Storage: Redis when ``MEM_RATE_LIMIT_STORAGE_URL`` or ``MEM_REDIS_URL`` is set (counts are shared by every
API process and exact under concurrency: limits increments atomically in Redis), in-process memory
otherwise. The moving-window strategy counts the last hour exactly rather than a fixed clock hour, so a
client cannot spend two budgets across a window boundary.

If the Redis storage fails, limiting falls back to in-memory counts instead of failing the request: a
rate-limit outage must not become an API outage.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time

from flask import Flask, Response, current_app, request
from flask_limiter import HeaderNames, Limiter
from flask_limiter.errors import RateLimitExceeded
from limits import parse_many

from api.problems import Problem, problem_response
from shared.config import Settings

log = logging.getLogger(__name__)

#: Rate class -> the Settings field holding its limit.
RATE_CLASSES: dict[str, str] = {
    "ingest": "rate_limit_ingest",
    "query": "rate_limit_query",
    "metadata": "rate_limit_metadata",
    "jobs": "rate_limit_jobs",
    "admin": "rate_limit_admin",
}


def check_rate_class(name: str | None) -> None:
    """Raise ``ValueError`` for a rate class that does not exist (a typo must fail at import, not silently)."""
    if name is not None and name not in RATE_CLASSES:
        raise ValueError(f"unknown rate class {name!r}; expected one of {sorted(RATE_CLASSES)} or None")


def validate_limit_settings(settings: Settings) -> None:
    """Parse every configured limit once at start-up so a bad ``MEM_RATE_LIMIT_*`` fails loudly then."""
    for cls, fieldname in RATE_CLASSES.items():
        value = getattr(settings, fieldname)
        if value.strip():
            try:
                parse_many(value)
            except ValueError as exc:
                raise ValueError(f"MEM_{fieldname.upper()}={value!r} is not a rate limit ({cls}): {exc}") from None


def _endpoint_rate_class() -> str | None:
    from api.contract import spec_for_endpoint

    spec = spec_for_endpoint(request.endpoint)
    return spec.rate_limit if spec is not None else None


def _current_limit() -> str:
    """The limit string of the endpoint being called ("" = not limited), read from the settings per request."""
    if request.method == "OPTIONS":  # CORS preflights carry no credentials and do no work
        return ""
    cls = _endpoint_rate_class()
    if cls is None:
        return ""
    settings: Settings = current_app.config["SETTINGS"]
    return getattr(settings, RATE_CLASSES[cls]).strip()


def principal_key() -> str:
    """The bucket owner: the authenticated principal, or the client address for unauthenticated calls.

    Unauthenticated calls are counted by address so that guessing credentials is limited too; the
    endpoint itself still answers them with 401.
    """
    from api.auth import principal_or_none

    try:
        principal = principal_or_none()
    except Exception:  # e.g. the database is down: the endpoint reports that; the limiter must not
        principal = None
    if principal is not None:
        return f"p:{principal.subject}"
    return f"ip:{request.remote_addr or 'unknown'}"


# flask-limiter writes its retry hint on *every* response, which would put a Retry-After on 2xx answers
# and overwrite the one a 503 sets; it is renamed to this header and dropped, and the 429 handler sets
# the real Retry-After itself.
_LIMITER_RETRY_HEADER = "X-RateLimit-Retry-After"


def _too_many(exc: RateLimitExceeded) -> Response:
    limit = exc.limit.limit
    window = limit.get_expiry()
    retry = window
    limiter: Limiter | None = current_app.extensions.get("mem_limiter")
    current = limiter.current_limit if limiter is not None else None
    if current is not None:
        with contextlib.suppress(Exception):  # storage trouble: fall back to the whole window
            retry = current.reset_at - time.time()
    detail = (f"rate limit exceeded: {limit.amount} requests per {window} seconds for this endpoint "
              "and caller; retry after the number of seconds in Retry-After")
    return problem_response(Problem(429, detail, headers={"Retry-After": str(min(max(1, math.ceil(retry)), window))}))


def _drop_limiter_retry_header(response: Response) -> Response:
    response.headers.pop(_LIMITER_RETRY_HEADER, None)
    return response


def init_limiter(app: Flask, settings: Settings) -> Limiter | None:
    """Attach flask-limiter to ``app`` (``None`` when ``MEM_RATE_LIMIT_ENABLED=false``)."""
    if not settings.rate_limit_enabled:
        return None
    validate_limit_settings(settings)
    storage = settings.rate_limit_storage_url or settings.redis_url or "memory://"
    limiter = Limiter(
        key_func=principal_key,
        default_limits=[_current_limit],
        default_limits_per_method=False,
        storage_uri=storage,
        strategy="moving-window",
        headers_enabled=True,
        key_prefix=settings.rate_limit_key_prefix,
        in_memory_fallback_enabled=storage != "memory://",
        retry_after="delta-seconds",
        header_name_mapping={HeaderNames.RETRY_AFTER: _LIMITER_RETRY_HEADER},
        swallow_errors=True,
    )
    # Registered before the limiter's own hook, so it runs after it (Flask runs them in reverse).
    app.after_request(_drop_limiter_retry_header)
    limiter.init_app(app)
    app.register_error_handler(RateLimitExceeded, _too_many)
    app.extensions["mem_limiter"] = limiter
    return limiter

