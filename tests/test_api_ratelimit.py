"""Rate limits per principal and endpoint (flask-limiter): headers, 429 problems, exactness under 50
concurrent clients against a real threaded HTTP server, in memory and in the real Redis."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from flask import Flask

from tests.conftest import REDIS_URL
from tests.wsgi_server import serving

INLINE = {"type": "inline", "documents": [{"path": "a.md", "content": "# A\n\nhello\n"}]}


def _app(settings: Any, **limits: Any) -> Flask:
    from api.app import create_app

    app = create_app(settings.model_copy(update={"rate_limit_enabled": True, **limits}))
    app.testing = True
    return app


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A unique key prefix in the real Redis (skips without Redis); its keys are removed afterwards."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    prefix = f"mem-rl-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    for key in client.scan_iter(match=f"*{prefix}*"):
        client.delete(key)


def test_headers_then_429_problem_with_retry_after(settings: Any, make_key: Callable[..., str]) -> None:
    client = _app(settings, rate_limit_metadata="3/hour").test_client()
    headers = _bearer(make_key(caps=["memory:read"]))
    remaining = []
    for _ in range(3):
        resp = client.get("/memory/projects", headers=headers)
        assert resp.status_code == 200
        assert resp.headers["X-RateLimit-Limit"] == "3"
        assert "Retry-After" not in resp.headers  # only a refusal says when to come back
        remaining.append(int(resp.headers["X-RateLimit-Remaining"]))
    assert remaining == [2, 1, 0]
    resp = client.get("/memory/projects", headers=headers)
    assert resp.status_code == 429
    assert resp.mimetype == "application/problem+json"
    problem = resp.get_json()
    assert problem["status"] == 429 and "rate limit" in problem["detail"]
    assert problem["request_id"] == resp.headers["X-Request-ID"]
    assert 1 <= int(resp.headers["Retry-After"]) <= 3600
    assert resp.headers["X-RateLimit-Limit"] == "3" and resp.headers["X-RateLimit-Remaining"] == "0"
    assert int(resp.headers["X-RateLimit-Reset"]) > 0


def test_buckets_are_per_principal_and_per_endpoint(settings: Any, make_key: Callable[..., str]) -> None:
    client = _app(settings, rate_limit_metadata="2/hour").test_client()
    first, second = _bearer(make_key(caps=["memory:read"])), _bearer(make_key(caps=["memory:read"]))
    assert [client.get("/memory/projects", headers=first).status_code for _ in range(3)] == [200, 200, 429]
    # Another principal has its own budget; the same principal has a separate one per endpoint.
    assert client.get("/memory/projects", headers=second).status_code == 200
    assert client.get("/memory/skills", headers=first).status_code == 200
    # Open endpoints are never limited.
    assert all(client.get("/health").status_code == 200 for _ in range(5))


def test_each_rate_class_reads_its_own_setting(settings: Any, make_key: Callable[..., str],
                                              project_name: str) -> None:
    client = _app(settings, rate_limit_ingest="1/hour", rate_limit_jobs="2/hour",
                  rate_limit_metadata="50/hour").test_client()
    headers = _bearer(make_key(caps=["memory:write"]))
    body = {"project": project_name, "source": INLINE}
    created = client.post("/memory/ingest", json=body, headers=headers)
    assert created.status_code == 202 and created.headers["X-RateLimit-Limit"] == "1"
    assert client.post("/memory/ingest", json=body, headers=headers).status_code == 429
    job_url = created.headers["Location"]
    assert [client.get(job_url, headers=headers).status_code for _ in range(3)] == [200, 200, 429]
    assert client.get("/memory/projects", headers=headers).headers["X-RateLimit-Limit"] == "50"


def test_unauthenticated_attempts_are_limited_by_address(settings: Any) -> None:
    client = _app(settings, rate_limit_metadata="3/hour").test_client()
    bad = {"Authorization": "Bearer pmk_0123456789abcdef_" + "A" * 43}
    assert [client.get("/memory/projects", headers=bad).status_code for _ in range(4)] == [401, 401, 401, 429]


def test_limits_can_be_switched_off_and_bad_limits_fail_at_start(settings: Any,
                                                                 make_key: Callable[..., str]) -> None:
    client = _app(settings, rate_limit_enabled=False, rate_limit_metadata="1/hour").test_client()
    headers = _bearer(make_key(caps=["memory:read"]))
    assert [client.get("/memory/projects", headers=headers).status_code for _ in range(3)] == [200] * 3
    with pytest.raises(ValueError, match="MEM_RATE_LIMIT_QUERY"):
        _app(settings, rate_limit_query="lots per fortnight")


def _hammer(url: str, headers: dict[str, str], clients: int, per_client: int) -> Counter[int]:
    """``clients`` threads, each with its own connection, sending ``per_client`` requests; status counts."""

    def one_client(_: int) -> list[int]:
        with requests.Session() as http:
            return [http.get(url, headers=headers, timeout=60).status_code for _ in range(per_client)]

    with ThreadPoolExecutor(max_workers=clients) as pool:
        return Counter(status for statuses in pool.map(one_client, range(clients)) for status in statuses)


@pytest.mark.parametrize("storage", ["memory", "redis"])
def test_exact_under_50_concurrent_clients(settings: Any, make_key: Callable[..., str], storage: str,
                                           request: pytest.FixtureRequest) -> None:
    overrides: dict[str, Any] = {"rate_limit_metadata": "60/hour"}
    if storage == "redis":
        overrides |= {"rate_limit_storage_url": REDIS_URL,
                      "rate_limit_key_prefix": request.getfixturevalue("redis_prefix")}
    app = _app(settings, **overrides)
    headers = _bearer(make_key(caps=["memory:read"]))
    with serving(app) as base:
        counts = _hammer(f"{base}/memory/projects", headers, clients=50, per_client=3)
    assert counts == Counter({200: 60, 429: 90})


def test_redis_counts_are_shared_by_every_api_process(settings: Any, make_key: Callable[..., str],
                                                      redis_prefix: str) -> None:
    shared = {"rate_limit_metadata": "4/hour", "rate_limit_storage_url": REDIS_URL,
              "rate_limit_key_prefix": redis_prefix}
    one, two = _app(settings, **shared).test_client(), _app(settings, **shared).test_client()
    headers = _bearer(make_key(caps=["memory:read"]))
    statuses = [c.get("/memory/projects", headers=headers).status_code for c in (one, two, one, two, one, two)]
    assert statuses == [200, 200, 200, 200, 429, 429]


def test_unreachable_redis_falls_back_to_memory_instead_of_failing(settings: Any,
                                                                   make_key: Callable[..., str]) -> None:
    # Port 1 on loopback refuses connections at once: a Redis outage, without waiting for a timeout.
    client = _app(settings, rate_limit_metadata="2/hour",
                  rate_limit_storage_url="redis://127.0.0.1:1/0").test_client()
    headers = _bearer(make_key(caps=["memory:read"]))
    assert [client.get("/memory/projects", headers=headers).status_code for _ in range(3)] == [200, 200, 429]
