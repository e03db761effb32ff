"""The Flask application factory."""

from __future__ import annotations

import importlib
import logging
import re
import time
import uuid

from flask import Flask, Response, g, request
from flask_cors import CORS

from api.limits import init_limiter
from api.problems import Problem, install_error_handlers
from shared.config import Settings, get_settings
from shared.logjson import configure_logging, request_id_var

log = logging.getLogger("api")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# Routes whose bodies may be large (documents); everything else gets the small default limit.
LARGE_BODY_ENDPOINTS = frozenset({"ingest.create", "diagnosis.diagnose", "optimizer.optimize",
                                  "grc.draft", "hooks.forgejo", "diagnosis.context_post",
                                  # so an over-long query gets the 400 naming the query limit, not a 413
                                  "query.query_post", "query.with_context_post"})

# One blueprint per resource; each module exposes ``bp``.
BLUEPRINT_MODULES: tuple[str, ...] = (
    "api.health",
    "api.ingest",
    "api.projects",
    "api.openapi",
    "api.docs",
    "api.vault",
    "api.grc",
    "api.hooks",
    "api.query",
    "api.diagnosis",
    "api.optimizer",
)

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-site",
}

# CORS (flask-cors), only for the origins listed in MEM_CORS_ORIGINS; none by default.
CORS_ALLOW_HEADERS = ["Authorization", "Content-Type", "Idempotency-Key", "X-Request-ID"]
CORS_EXPOSE_HEADERS = ["X-Request-ID", "Location", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining",
                       "X-RateLimit-Reset", "Idempotent-Replayed"]


def create_app(settings: Settings | None = None) -> Flask:
    """Build the API: blueprints by resource, problem+json errors, request ids, limits, security headers."""
    settings = settings or get_settings()
    configure_logging(settings.log_level)
    app = Flask("poimen-memory", static_folder=None)  # nothing is served from disk but /docs assets
    app.config["SETTINGS"] = settings
    app.config["MAX_CONTENT_LENGTH"] = settings.max_ingest_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    if settings.auth == "off":
        log.warning(
            "AUTHENTICATION IS OFF (MEM_AUTH=off): every caller is an admin of every project. "
            "Use this for local experiments only."
        )

    install_error_handlers(app)
    _install_request_hooks(app, settings)

    for name in BLUEPRINT_MODULES:
        app.register_blueprint(importlib.import_module(name).bp)
    init_limiter(app, settings)  # after the request-id hook, so a 429 carries the request id
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:
        CORS(app, origins=origins, allow_headers=CORS_ALLOW_HEADERS, expose_headers=CORS_EXPOSE_HEADERS,
             methods=["GET", "POST", "PUT", "PATCH", "DELETE"], max_age=600, supports_credentials=False)
    return app


def _install_request_hooks(app: Flask, settings: Settings) -> None:
    @app.before_request
    def _start() -> None:
        incoming = request.headers.get("X-Request-ID", "")
        g.request_id = incoming if _REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex
        request_id_var.set(g.request_id)
        g.started = time.perf_counter()
        limit = settings.max_ingest_body_bytes if request.endpoint in LARGE_BODY_ENDPOINTS else settings.max_body_bytes
        request.max_content_length = limit
        if request.content_length is not None and request.content_length > limit:
            raise Problem(413, f"the request body is {request.content_length} bytes; this endpoint accepts at most {limit}")

    @app.after_request
    def _finish(response: Response) -> Response:
        response.headers["X-Request-ID"] = getattr(g, "request_id", "")
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        elapsed = (time.perf_counter() - g.started) * 1000 if "started" in g else None
        log.info(
            "request",
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "ms": round(elapsed, 1) if elapsed is not None else None,
                "principal": getattr(g.get("principal"), "subject", None),
            },
        )
        return response
