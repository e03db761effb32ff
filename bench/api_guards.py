"""What the API's guard rails cost per request: authentication, rate limiting and idempotency.

    .venv/bin/python bench/api_guards.py [--data-dir /tmp/mem-bench-guards] [--n 300] [--redis-url redis://127.0.0.1:6379/9]

Starts the embedded PostgreSQL under ``--data-dir`` (wiped first) and an OIDC issuer on 127.0.0.1, then
times requests through the Flask test client (no network in between, so the numbers are the service's own
work) and prints median / p95 milliseconds per request for:

- ``/health`` (no guard at all: the floor), ``/memory/projects`` with an API key, with a JWT;
- the same with rate limiting off, in memory, and in Redis (when ``--redis-url`` answers);
- an ingest POST with a fresh ``Idempotency-Key`` and its replay.

Reads nothing from ../shared; writes only under ``--data-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _timed(fn: Callable[[], object], n: int) -> dict[str, float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 3), "p95_ms": round(samples[int(0.95 * (n - 1))], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/mem-bench-guards"))
    parser.add_argument("--n", type=int, default=300, help="requests per measurement")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()

    shutil.rmtree(args.data_dir, ignore_errors=True)
    args.data_dir.mkdir(parents=True)
    os.environ["MEM_DATA_DIR"] = str(args.data_dir)
    os.environ["MEM_LOG_LEVEL"] = "WARNING"

    from api.app import create_app
    from shared.config import get_settings
    from shared.db import embedded
    from shared.db.engine import get_engine, session_scope, upgrade_database
    from shared.identity import keystore
    from tests.oidc_issuer import DEFAULT_AUDIENCE, OidcTestIssuer

    embedded.start(args.data_dir)
    results: dict[str, dict[str, float]] = {}
    try:
        upgrade_database(get_engine())
        with session_scope() as session:
            key, _ = keystore.create_key(session, name="bench", capabilities=["memory:write"], projects=None)
        with OidcTestIssuer() as issuer:
            os.environ["MEM_OIDC_ISSUER"] = issuer.issuer
            os.environ["MEM_OIDC_AUDIENCE"] = DEFAULT_AUDIENCE
            get_settings.cache_clear()
            base = get_settings()
            token = issuer.mint({"permissions": ["memory:write"], "projects": ["bench"]}, ttl=3600)
            key_h = {"Authorization": f"Bearer {key}"}
            jwt_h = {"Authorization": f"Bearer {token}"}
            high = {"rate_limit_metadata": "100000000/hour", "rate_limit_ingest": "100000000/hour"}

            variants: dict[str, dict[str, object]] = {"limits off": {"rate_limit_enabled": False},
                                                      "limits in memory": high}
            try:
                import redis

                redis.Redis.from_url(args.redis_url).ping()
                variants["limits in redis"] = {**high, "rate_limit_storage_url": args.redis_url,
                                               "rate_limit_key_prefix": f"bench-{uuid.uuid4().hex[:8]}"}
            except Exception as exc:  # no Redis here: report it and measure the rest
                print(f"# redis not measured: {type(exc).__name__}", file=sys.stderr)

            for label, overrides in variants.items():
                client = create_app(base.model_copy(update=overrides)).test_client()
                client.get("/memory/projects", headers=jwt_h)  # warm: discovery and JWKS fetched once
                results[f"/health, {label}"] = _timed(lambda c=client: c.get("/health"), args.n)
                results[f"/memory/projects, API key, {label}"] = _timed(
                    lambda c=client: c.get("/memory/projects", headers=key_h), args.n)
                results[f"/memory/projects, JWT, {label}"] = _timed(
                    lambda c=client: c.get("/memory/projects", headers=jwt_h), args.n)

            client = create_app(base.model_copy(update=high)).test_client()
            body = {"project": "bench", "source": {"type": "inline", "documents": [
                {"path": "a.md", "content": "# A\n\nbench\n"}]}}

            def fresh() -> None:
                client.post("/memory/ingest", json=body, headers={**key_h, "Idempotency-Key": uuid.uuid4().hex})

            results["POST /memory/ingest, new Idempotency-Key"] = _timed(fresh, max(20, args.n // 5))
            client.post("/memory/ingest", json=body, headers={**key_h, "Idempotency-Key": "bench-replay"})
            results["POST /memory/ingest, replayed Idempotency-Key"] = _timed(
                lambda: client.post("/memory/ingest", json=body,
                                    headers={**key_h, "Idempotency-Key": "bench-replay"}), args.n)
    finally:
        embedded.stop(args.data_dir)
    print(json.dumps({"n": args.n, "results": results}, indent=2))


if __name__ == "__main__":
    main()
