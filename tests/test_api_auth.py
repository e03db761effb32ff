"""Authentication and authorisation over HTTP: a real OIDC issuer, real API keys, the real Flask app.

Every forged or broken credential must be a 401 problem; a missing capability or a project outside the
caller's scope a 403 that looks the same whether the project exists or not; and no token or key ever
reaches the JSON logs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from shared.db.engine import session_scope
from shared.identity import keystore
from shared.identity.apikeys import parse_api_key
from shared.logjson import JsonFormatter
from tests.oidc_issuer import DEFAULT_AUDIENCE, OidcTestIssuer, b64url, compact, generate_signing_key

INLINE_DOC = {"path": "runbooks/a.md", "content": "# A\n\nhello\n"}


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """Everything logged during the test, as the service's JSON lines, at DEBUG level."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield buffer
    root.removeHandler(handler)
    root.setLevel(old_level)


@pytest.fixture
def oidc_app(database: str, oidc_issuer: OidcTestIssuer, monkeypatch: pytest.MonkeyPatch,
             json_logs: io.StringIO) -> Iterator[Flask]:
    """The app with MEM_OIDC_ISSUER/AUDIENCE pointed at the test issuer (discovery over HTTP)."""
    from api.app import create_app
    from shared.config import get_settings

    monkeypatch.setenv("MEM_OIDC_ISSUER", oidc_issuer.issuer)
    monkeypatch.setenv("MEM_OIDC_AUDIENCE", DEFAULT_AUDIENCE)
    get_settings.cache_clear()
    app = create_app(get_settings())
    app.testing = True
    logging.getLogger().setLevel(logging.DEBUG)  # create_app applied the configured level; see everything
    yield app
    get_settings.cache_clear()


@pytest.fixture
def http(oidc_app: Flask) -> FlaskClient:
    return oidc_app.test_client()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _assert_problem(resp, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert resp.status_code == status, resp.get_data(as_text=True)
    assert resp.mimetype == "application/problem+json"
    body = resp.get_json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"].startswith("https://")
    assert body["request_id"] == resp.headers["X-Request-ID"]
    return body


def _forged_tokens(issuer: OidcTestIssuer) -> dict[str, str]:
    """Every token of the attack matrix; each would be an admin token if it were accepted."""
    admin = {"permissions": ["memory:admin"]}
    rsa = issuer.key("RSA")
    claims = issuer.claims(admin)
    signing_input = compact({"alg": "HS256", "kid": rsa.kid}, claims).rsplit(".", 1)[0]
    hs_sig = hmac.new(rsa.as_pem(private=False), signing_input.encode(), hashlib.sha256).digest()
    valid = issuer.mint({"permissions": ["memory:read"]})
    head, _payload, sig = valid.split(".")
    tampered_payload = b64url(json.dumps(issuer.claims(admin)).encode())
    stranger = generate_signing_key("RSA")
    now = int(time.time())
    return {
        "alg none": compact({"alg": "none", "kid": rsa.kid}, claims),
        "alg none, empty signature": compact({"alg": "none"}, claims),
        "HS256 with the public key": f"{signing_input}.{b64url(hs_sig)}",
        "expired": issuer.mint(admin, ttl=-3600),
        "not yet valid": issuer.mint({**admin, "nbf": now + 3600}),
        "wrong issuer": issuer.mint({**admin, "iss": "https://evil.example"}),
        "wrong audience": issuer.mint({**admin, "aud": "another-service"}),
        "unknown kid": issuer.mint(admin, kid="no-such-key"),
        "tampered payload": f"{head}.{tampered_payload}.{sig}",
        "another key, unknown kid": issuer.mint(admin, key=stranger),
        "another key, known kid": issuer.mint(admin, key=stranger, kid=str(rsa.kid)),
        "no subject": issuer.mint(admin, omit=["sub"]),
        "no expiry": issuer.mint(admin, omit=["exp"]),
        "garbage": "garbage",
        "three garbage segments": "a.b.c",
        "base64 junk": base64.urlsafe_b64encode(b"\x00" * 60).decode().rstrip("="),
        "fake api key": "pmk_0123456789abcdef_" + "A" * 43,
        "malformed api key": "pmk_nope",
    }


def test_valid_tokens_of_every_allowed_algorithm_authenticate(http: FlaskClient,
                                                              oidc_issuer: OidcTestIssuer) -> None:
    for kty, alg in (("RSA", "RS256"), ("EC", "ES256"), ("RSA", "PS256")):
        token = oidc_issuer.mint({"permissions": ["memory:read"], "projects": ["alpha"]},
                                 key=oidc_issuer.key(kty), alg=alg)
        resp = http.get("/memory/projects", headers=_bearer(token))
        assert resp.status_code == 200, (alg, resp.get_json())


@pytest.mark.parametrize("case", [
    "alg none", "alg none, empty signature", "HS256 with the public key", "expired", "not yet valid",
    "wrong issuer", "wrong audience", "unknown kid", "tampered payload", "another key, unknown kid",
    "another key, known kid", "no subject", "no expiry", "garbage", "three garbage segments", "base64 junk",
    "fake api key", "malformed api key",
])
def test_attack_matrix_is_401(http: FlaskClient, oidc_issuer: OidcTestIssuer, case: str,
                              json_logs: io.StringIO) -> None:
    token = _forged_tokens(oidc_issuer)[case]
    for method, path, body in (("GET", "/memory/projects", None),
                               ("POST", "/memory/ingest", {"project": "alpha",
                                                           "source": {"type": "inline", "documents": [INLINE_DOC]}})):
        resp = http.open(path, method=method, json=body, headers=_bearer(token))
        problem = _assert_problem(resp, 401)
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        assert token not in json.dumps(problem)
    assert token not in json_logs.getvalue()


MALFORMED_HEADERS: dict[str, str] = {
    "basic scheme": "Basic dXNlcjpwYXNz",
    "scheme only": "Bearer",
    "scheme and spaces": "Bearer    ",
    "other scheme": "Token abc.def.ghi",
    "two tokens": "Bearer a.b.c d.e.f",
    "tab separator": "Bearer\tabc",
    "oversize": "Bearer " + "a" * 20_000,
    "oversize api key": "Bearer pmk_" + "a" * 9_000,
    "unicode token": "Bearer ключ.токен.подпись",
    "unicode api key": "Bearer pmk_0123456789abcdef_" + "é" * 43,
    "emoji": "Bearer \U0001f511",
    "NUL in token": "Bearer abc\x00def.ghi.jkl",
    "NUL in api key": "Bearer pmk_0123456789abcdef_" + "A" * 20 + "\x00" + "A" * 22,
    "control characters": "Bearer \x07\x08\x1b",
    "sql metacharacters": "Bearer pmk_' OR 1=1 --",
    "glob metacharacters": "Bearer pmk_*_*",
}


@pytest.mark.parametrize("case", list(MALFORMED_HEADERS))
def test_malformed_authorization_headers_are_401(http: FlaskClient, case: str, json_logs: io.StringIO) -> None:
    header = MALFORMED_HEADERS[case]
    resp = http.get("/memory/projects", headers={"Authorization": header})
    _assert_problem(resp, 401)
    secret_part = header.partition(" ")[2]
    if len(secret_part) > 4:
        assert secret_part not in json_logs.getvalue()


def test_missing_authorization_is_401(http: FlaskClient) -> None:
    problem = _assert_problem(http.get("/memory/projects"), 401)
    assert "Authorization" in problem["detail"]


def test_open_endpoints_need_no_credentials(http: FlaskClient) -> None:
    assert http.get("/health").status_code == 200
    assert http.get("/openapi.json").status_code == 200
    assert http.get("/docs").status_code == 200


def test_missing_capability_is_403(http: FlaskClient, oidc_issuer: OidcTestIssuer,
                                   make_key: Callable[..., str], project_name: str) -> None:
    body = {"project": project_name, "source": {"type": "inline", "documents": [INLINE_DOC]}}
    reader_token = oidc_issuer.mint({"permissions": ["memory:read"], "projects": [project_name]})
    reader_key = make_key(caps=["memory:read"], projects=[project_name])
    for credential in (reader_token, reader_key):
        problem = _assert_problem(http.post("/memory/ingest", json=body, headers=_bearer(credential)), 403)
        assert "memory:write" in problem["detail"]
    # A token whose permissions are only OIDC scopes has no capability at all, not even read.
    nothing = oidc_issuer.mint({"scope": "openid profile email"})
    _assert_problem(http.get("/memory/projects", headers=_bearer(nothing)), 403)


def test_project_outside_scope_is_403_without_existence_leak(http: FlaskClient, oidc_issuer: OidcTestIssuer,
                                                             make_key: Callable[..., str]) -> None:
    from shared.ingest.pipeline import ingest_inline

    mine, theirs, ghost = (f"t-{uuid.uuid4().hex[:10]}" for _ in range(3))
    ingest_inline(theirs, {"type": "inline", "documents": [INLINE_DOC]})  # exists, but not for this caller
    writer_token = oidc_issuer.mint({"permissions": ["memory:write"], "projects": [mine]})
    writer_key = make_key(caps=["memory:write"], projects=[mine])
    for credential in (writer_token, writer_key):
        answers = []
        for project in (theirs, ghost):
            body = {"project": project, "source": {"type": "inline", "documents": [INLINE_DOC]}}
            resp = http.post("/memory/ingest", json=body, headers=_bearer(credential))
            problem = _assert_problem(resp, 403)
            answers.append((problem["title"], problem["type"], problem["detail"].replace(project, "<p>")))
        assert answers[0] == answers[1]  # an existing hidden project looks exactly like a missing one
        listed = http.get("/memory/projects", headers=_bearer(credential)).get_json()["projects"]
        assert theirs not in {p["name"] for p in listed}


def test_job_of_a_hidden_project_looks_like_a_missing_job(http: FlaskClient, make_key: Callable[..., str],
                                                          admin_headers: dict[str, str]) -> None:
    theirs = f"t-{uuid.uuid4().hex[:10]}"
    body = {"project": theirs, "source": {"type": "inline", "documents": [INLINE_DOC]}}
    job_id = http.post("/memory/ingest", json=body, headers=admin_headers).get_json()["id"]
    outsider = _bearer(make_key(caps=["memory:read"], projects=["somewhere-else"]))
    hidden = _assert_problem(http.get(f"/memory/jobs/{job_id}", headers=outsider), 404)
    missing_id = str(uuid.uuid4())
    missing = _assert_problem(http.get(f"/memory/jobs/{missing_id}", headers=outsider), 404)
    assert hidden["detail"].replace(job_id, "<id>") == missing["detail"].replace(missing_id, "<id>")
    assert http.get(f"/memory/jobs/{job_id}", headers=admin_headers).status_code == 200


def test_role_project_mapping_from_the_database_widens_a_token(http: FlaskClient,
                                                               oidc_issuer: OidcTestIssuer) -> None:
    from shared.ingest.pipeline import ingest_inline

    project = f"t-{uuid.uuid4().hex[:10]}"
    role = f"role-{uuid.uuid4().hex[:8]}"
    ingest_inline(project, {"type": "inline", "documents": [INLINE_DOC]})
    token = oidc_issuer.mint({"permissions": ["memory:read"], "roles": [role]})

    def visible() -> set[str]:
        resp = http.get("/memory/projects", headers=_bearer(token))
        assert resp.status_code == 200
        return {p["name"] for p in resp.get_json()["projects"]}

    assert project not in visible()
    with session_scope() as session:
        keystore.grant_role_project(session, role, project)
    assert project in visible()  # read per request: no restart, no cache to wait for
    with session_scope() as session:
        keystore.revoke_role_project(session, role, project)
    assert project not in visible()


def test_revoked_api_key_is_401(http: FlaskClient, make_key: Callable[..., str]) -> None:
    key = make_key(caps=["memory:read"])
    assert http.get("/memory/projects", headers=_bearer(key)).status_code == 200
    key_id = key.split("_")[1]
    with session_scope() as session:
        assert keystore.revoke_key(session, key_id)
    _assert_problem(http.get("/memory/projects", headers=_bearer(key)), 401)


def test_wrong_secret_for_a_real_key_id_is_401(http: FlaskClient, make_key: Callable[..., str]) -> None:
    key = make_key(caps=["memory:read"])
    prefix, key_id, secret = key.split("_", 2)
    forged = f"{prefix}_{key_id}_{'B' * len(secret)}"
    _assert_problem(http.get("/memory/projects", headers=_bearer(forged)), 401)


def test_issuer_outage_before_any_key_is_a_503_problem(http: FlaskClient, oidc_issuer: OidcTestIssuer) -> None:
    token = oidc_issuer.mint({"permissions": ["memory:read"]})
    oidc_issuer.jwks_status = 500
    problem = _assert_problem(http.get("/memory/projects", headers=_bearer(token)), 503)
    assert "identity provider" in problem["detail"]


def test_no_secret_reaches_the_logs(http: FlaskClient, oidc_issuer: OidcTestIssuer,
                                    make_key: Callable[..., str], json_logs: io.StringIO) -> None:
    logging.getLogger().setLevel(logging.DEBUG)  # create_app set the configured level; see every record
    key = make_key(caps=["memory:write"])
    token = oidc_issuer.mint({"permissions": ["memory:write"], "projects": ["alpha"]})
    expired = oidc_issuer.mint({"permissions": ["memory:write"]}, ttl=-3600)
    body = {"project": "alpha", "source": {"type": "inline", "documents": [INLINE_DOC]}}
    wrong_secret = key[:-1] + ("y" if key.endswith("x") else "x")
    for credential in (key, token, expired, wrong_secret):
        http.get("/memory/projects", headers=_bearer(credential))
        http.post("/memory/ingest", json=body, headers={**_bearer(credential), "Idempotency-Key": "log-check"})
    logs = json_logs.getvalue()
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("msg") == "request"]
    assert len(requests) == 8 and all(line.get("request_id") for line in requests)
    # The principal is named by its public handle, never by its secret.
    # parse_api_key, not a split on "_": the secret is token_urlsafe and may itself hold "_".
    parsed = parse_api_key(key)
    assert parsed is not None
    key_id, key_secret = parsed
    assert any(line.get("principal") == f"api_key:{key_id}" for line in requests)
    for secret in (key, key_secret, token, token.split(".")[2], expired):
        assert secret not in logs


def test_auth_off_is_every_capability_and_warns_loudly(database: str, monkeypatch: pytest.MonkeyPatch,
                                                      json_logs: io.StringIO) -> None:
    from api.app import create_app
    from shared.config import get_settings

    monkeypatch.setenv("MEM_AUTH", "off")
    get_settings.cache_clear()
    try:
        app = create_app(get_settings())
    finally:
        get_settings.cache_clear()
    warnings = [json.loads(line) for line in json_logs.getvalue().splitlines() if "MEM_AUTH=off" in line]
    assert warnings and warnings[0]["level"] == "WARNING"
    resp = app.test_client().get("/memory/projects")
    assert resp.status_code == 200


RAW_AUTH_HEADERS: dict[str, bytes] = {
    "NUL byte": b"Authorization: Bearer pmk_0123456789abcdef_" + b"A" * 20 + b"\x00" + b"A" * 22,
    "raw UTF-8": "Authorization: Bearer токен".encode(),
    "invalid UTF-8": b"Authorization: Bearer \xff\xfe\xfd.\xc3\x28.abc",
    "oversize": b"Authorization: Bearer " + b"x" * 12_000,
    "duplicate scheme": b"Authorization: Bearer Bearer abc",
}


@pytest.mark.parametrize("case", list(RAW_AUTH_HEADERS))
def test_raw_hostile_headers_over_a_real_socket_are_401_problems(oidc_app: Flask, case: str,
                                                                 json_logs: io.StringIO) -> None:
    from tests.wsgi_server import raw_request, serving

    with serving(oidc_app) as url:
        status, headers, body = raw_request(url, b"GET /memory/projects HTTP/1.1\r\nHost: x\r\n"
                                            + RAW_AUTH_HEADERS[case])
    assert status == 401
    assert headers["content-type"] == "application/problem+json"
    assert json.loads(body)["status"] == 401
    assert RAW_AUTH_HEADERS[case].split(b" ")[-1].decode("latin-1") not in json_logs.getvalue()
