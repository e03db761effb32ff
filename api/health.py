"""Liveness and readiness."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from sqlalchemy import text

from api.contract import endpoint
from api.schemas import Health, Ready
from shared.config import Settings

bp = Blueprint("health", __name__)


@endpoint(bp, "/health", "GET", summary="Liveness: the process answers", capability=None,
          responses={200: ("alive", Health)})
def health():  # type: ignore[no-untyped-def]
    """Always ok while the process serves requests."""
    return jsonify({"status": "ok"})


def _check(name: str, fn) -> tuple[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    try:
        return name, {"ok": True, "detail": str(fn())}
    except Exception as exc:  # readiness reports every failure instead of raising it
        return name, {"ok": False, "detail": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}


@endpoint(bp, "/ready", "GET", summary="Readiness: database, broker, lexical engine and embedder",
          capability=None, responses={200: ("ready or degraded", Ready), 503: ("unavailable", Ready)})
def ready():  # type: ignore[no-untyped-def]
    """Each dependency reported; 503 when the database or the broker is down."""
    settings: Settings = current_app.config["SETTINGS"]

    def database() -> str:
        from shared.db.engine import get_engine

        with get_engine().connect() as conn:
            conn.execute(text("select 1"))
        return "postgresql+pgvector (embedded)" if settings.embedded_database else "postgresql+pgvector"

    def broker() -> str:
        from shared.jobs.broker import get_celery

        with get_celery().connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            return conn.transport_cls if isinstance(conn.transport_cls, str) else "connected"

    def lexical() -> str:
        from shared.search.lexical_factory import get_lexical_index

        report = get_lexical_index(settings).health()
        return ", ".join(f"{k}={v}" for k, v in report.items())

    def embedder() -> str:
        from shared.embedding import get_embedder

        emb = get_embedder(settings)
        if emb is None:
            raise RuntimeError("no embedder configured (MEM_EMBEDDER=none): queries are lexical only")
        return f"{emb.model_id} ({emb.dim}-d)"

    checks = dict(_check(n, f) for n, f in
                  (("database", database), ("broker", broker), ("lexical", lexical), ("embedder", embedder)))
    essential_ok = checks["database"]["ok"] and checks["broker"]["ok"]
    all_ok = all(c["ok"] for c in checks.values())
    status = "ready" if all_ok else ("degraded" if essential_ok else "unavailable")
    return jsonify({"status": status, "checks": checks}), (200 if essential_ok else 503)
