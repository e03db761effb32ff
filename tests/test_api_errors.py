"""Every error is an RFC 9457 problem with the request id; no response leaks a stack trace, SQL or a path;
request ids, security headers, CORS and body limits behave as configured."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.logjson import JsonFormatter

LEAKS = re.compile(r"Traceback|File \"|/work/|/tmp/|site-packages|psycopg|sqlalchemy|SELECT |INSERT ", re.I)


def _problem(resp, status: int) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, resp.get_data(as_text=True)
    assert resp.mimetype == "application/problem+json"
    body = resp.get_json()
    assert {"type", "title", "status", "detail", "request_id"} <= set(body)
    assert body["status"] == status and body["request_id"] == resp.headers["X-Request-ID"]
    assert not LEAKS.search(resp.get_data(as_text=True))
    return body


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield buffer
    root.removeHandler(handler)


def _app(settings: Any, **overrides: Any) -> Flask:
    from api.app import create_app

    app = create_app(settings.model_copy(update=overrides))
    app.testing = True
    return app


def test_unknown_route_and_wrong_method(client: FlaskClient, admin_headers: dict[str, str]) -> None:
    _problem(client.get("/no/such/route", headers=admin_headers), 404)
    resp = client.delete("/memory/projects", headers=admin_headers)
    _problem(resp, 405)
    assert "GET" in resp.headers["Allow"]


@pytest.mark.parametrize(("data", "content_type", "status"), [
    (b"{not json", "application/json", 400),
    (b"", "application/json", 400),
    (b"[1, 2]", "application/json", 400),
    (b'{"project": "a\\u0000b", "source": {"type": "inline"}}', "application/json", 400),
    (b'{"project": "x", "source": {"type": "inline"}}\x00', "application/json", 400),
    (b"\xff\xfe\xfd", "application/json", 400),
    (b"project=x", "application/x-www-form-urlencoded", 415),
    (b'{"project": "x"}', "text/plain", 415),
    (b'{"project": "Bad Name!", "source": {"type": "inline"}}', "application/json", 400),
    (b'{"project": "x", "source": {"type": "inline"}, "surprise": 1}', "application/json", 400),
    (b'{"project": "x", "source": {"type": "carrier-pigeon"}}', "application/json", 400),
    (b'{"project": "x", "source": {"type": "directory", "path": "../../etc"}}', "application/json", 400),
    (b'{"project": "x", "source": {"type": "directory", "path": "/etc"}}', "application/json", 400),
])
def test_bad_bodies_are_clear_problems(client: FlaskClient, admin_headers: dict[str, str], data: bytes,
                                       content_type: str, status: int) -> None:
    resp = client.post("/memory/ingest", data=data, content_type=content_type, headers=admin_headers)
    body = _problem(resp, status)
    assert "/etc" not in body["detail"] or "source.path" in body["detail"]


@pytest.mark.parametrize("query", [
    "project=%00", "project=a%00b", "tag=%00", "project=" + "a" * 200, "project=*", "project=%27%20OR%201%3D1--",
    "project=a&project=b", "unknown=1", "project=%E2%80%AE",
])
def test_bad_query_strings_are_400(client: FlaskClient, admin_headers: dict[str, str], query: str) -> None:
    _problem(client.get(f"/memory/skills?{query}", headers=admin_headers), 400)


@pytest.mark.parametrize("job_id", ["%00", "'; DROP TABLE jobs; --", "*", "..%2F..%2Fetc", "x" * 5000, "%E2%98%83"])
def test_hostile_job_ids_are_404(client: FlaskClient, admin_headers: dict[str, str], job_id: str) -> None:
    _problem(client.get(f"/memory/jobs/{job_id}", headers=admin_headers), 404)


def test_body_size_limits_per_endpoint(settings: Any, admin_headers: dict[str, str]) -> None:
    client = _app(settings, max_body_bytes=1024, max_ingest_body_bytes=4096).test_client()
    doc = {"path": "a.md", "content": "x" * 3000}
    small_enough = {"project": "t-size", "source": {"type": "inline", "documents": [doc]}}
    assert client.post("/memory/ingest", json=small_enough, headers=admin_headers).status_code == 202
    doc["content"] = "x" * 5000
    body = _problem(client.post("/memory/ingest", json=small_enough, headers=admin_headers), 413)
    assert "4096" in body["detail"]


def test_unexpected_errors_are_generic_500s_logged_with_the_request_id(
        app: Flask, json_logs: io.StringIO) -> None:
    def explode() -> None:
        raise RuntimeError("secret internals at /srv/app/db.py: SELECT * FROM api_keys")

    app.add_url_rule("/explode", "explode", explode)
    resp = app.test_client().get("/explode", headers={"X-Request-ID": "trace-me-123"})
    body = _problem(resp, 500)
    assert body["request_id"] == "trace-me-123"
    assert "secret internals" not in resp.get_data(as_text=True)
    logged = [json.loads(line) for line in json_logs.getvalue().splitlines() if "trace-me-123" in line]
    assert any(line["level"] == "ERROR" and "RuntimeError" in line.get("exc", "") for line in logged)


def test_request_ids_are_echoed_or_generated(client: FlaskClient) -> None:
    assert client.get("/health", headers={"X-Request-ID": "abc-123"}).headers["X-Request-ID"] == "abc-123"
    generated = {client.get("/health").headers["X-Request-ID"] for _ in range(2)}
    assert len(generated) == 2 and all(re.fullmatch(r"[0-9a-f]{32}", rid) for rid in generated)
    # An id that could inject into logs or headers is replaced, not echoed.
    for hostile in ("a" * 500, "evil\u202eid", "x y", "<script>"):
        assert client.get("/health", headers={"X-Request-ID": hostile}).headers["X-Request-ID"] != hostile


def test_request_log_line_carries_the_request_id(settings: Any, json_logs: io.StringIO) -> None:
    app = _app(settings)
    logging.getLogger().setLevel(logging.INFO)
    app.test_client().get("/health", headers={"X-Request-ID": "log-line-42"})
    lines = [json.loads(line) for line in json_logs.getvalue().splitlines() if line.startswith("{")]
    assert any(line.get("msg") == "request" and line.get("request_id") == "log-line-42" and line["status"] == 200
               for line in lines)


def test_security_headers_on_every_response(client: FlaskClient, admin_headers: dict[str, str]) -> None:
    responses = [client.get("/health"), client.get("/nope"), client.get("/memory/projects"),
                 client.get("/memory/projects", headers=admin_headers), client.get("/openapi.json")]
    for resp in responses:
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        assert resp.headers["X-Frame-Options"] == "DENY"
        assert resp.headers["Referrer-Policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"]
        assert resp.headers["X-Request-ID"]
        assert "Access-Control-Allow-Origin" not in resp.headers  # CORS is off by default


def test_cors_only_for_configured_origins(settings: Any, admin_headers: dict[str, str]) -> None:
    client = _app(settings, cors_origins="https://console.example").test_client()
    ok = client.get("/memory/projects", headers={**admin_headers, "Origin": "https://console.example"})
    assert ok.headers["Access-Control-Allow-Origin"] == "https://console.example"
    assert "X-Request-ID" in ok.headers["Access-Control-Expose-Headers"]
    other = client.get("/memory/projects", headers={**admin_headers, "Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
    preflight = client.options("/memory/ingest", headers={
        "Origin": "https://console.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Authorization, Idempotency-Key, Content-Type"})
    assert preflight.status_code == 200
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    assert "idempotency-key" in preflight.headers["Access-Control-Allow-Headers"].lower()


def test_docs_page_runs_only_its_own_scripts(client: FlaskClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "unsafe" not in csp and "http" not in csp
    html = page.get_data(as_text=True)
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all(body.strip() == "" and 'src="/docs/' in attrs for attrs, body in scripts)
    assert "//" not in "".join(re.findall(r'(?:src|href)="([^"]+)"', html))  # nothing from another host
    for url in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert client.get(url).status_code == 200, url
    bundle = client.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.mimetype == "text/javascript" and len(bundle.data) > 100_000
    assert client.get("/docs/assets/..%2F__init__.py").status_code == 404
    assert client.get("/docs/assets/oauth2-redirect.html").status_code == 404  # not on the allow-list
    spec_url = re.search(r'data-spec-url="([^"]+)"', html)
    assert spec_url is not None and client.get(spec_url.group(1)).get_json()["openapi"] == "3.1.0"
