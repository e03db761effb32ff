"""The API against its own description: schemathesis fuzzes every operation in ``/openapi.json`` through
the WSGI app (bounded examples, positive and negative data) and checks that no response is a 5xx and
every response matches its declared status codes, media types and schemas.

Also: the document itself is valid OpenAPI 3.1 and declares what the contract decorator says.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from api.contract import REGISTRY

# Small and derandomized for CI; FUZZ_EXAMPLES=500 FUZZ_RANDOM=1 digs deeper by hand.
EXAMPLES_PER_OPERATION = int(os.environ.get("FUZZ_EXAMPLES", "12"))
DERANDOMIZE = not os.environ.get("FUZZ_RANDOM")

# Checks run: no 5xx; status codes, media types, headers and bodies as declared; schema-violating requests
# refused. Not run: positive_data_acceptance (every schema-valid request accepted), because some rules
# cannot be said in JSON Schema (a vault directory must exist, a document path must name its project) and
# refusing those with a 400 problem is correct.


@pytest.fixture
def fuzz_app(settings_for_fuzz: Any) -> Flask:
    from api.app import create_app

    app = create_app(settings_for_fuzz)
    app.testing = True
    return app


@pytest.fixture
def settings_for_fuzz(settings: Any) -> Any:
    # Limits are tested on their own (test_api_ratelimit); here they would only turn most cases into 429s.
    # Webhooks answer 503 while unconfigured (a deliberate "not set up" answer); give them a secret so
    # the fuzzer exercises their signature checks instead.
    return settings.model_copy(update={"rate_limit_enabled": False, "webhook_secret": "fuzz-secret"})


@pytest.fixture
def api_schema(fuzz_app: Flask, fuzz_auth: dict[str, str]) -> Any:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", fuzz_app)

    class KeyAuth:
        """Schemathesis applies it to operations that declare security, and knows when a case omits it."""

        def get(self, case: Any, ctx: Any) -> str:
            return fuzz_auth["Authorization"]

        def set(self, case: Any, data: str, ctx: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": data}

    schema.auth()(KeyAuth)
    return schema


@pytest.fixture(scope="module")
def fuzz_auth(database: str) -> dict[str, str]:
    """A write key limited to a project no other test uses, so fuzzed writes stay in their own corner."""
    from shared.db.engine import session_scope
    from shared.identity import keystore

    with session_scope() as session:
        plaintext, _ = keystore.create_key(session, name="schemathesis", capabilities=["memory:write"],
                                           projects=["fuzz"])
    return {"Authorization": f"Bearer {plaintext}"}


def _fuzz(schema: Any, operation: Any, mode: GenerationMode) -> None:
    # Driven by hand rather than with schemathesis' pytest plugin (@schema.parametrize /
    # from_fixture), which reads a private pytest attribute that pytest 9 no longer has.
    @given(case=operation.as_strategy(generation_mode=mode, auth_storage=schema.auth))
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=DERANDOMIZE,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.call_and_validate(excluded_checks=[positive_data_acceptance])

    try:
        run()
    except Unsatisfiable:  # negative mode on an operation with nothing that can be made invalid
        assert mode == GenerationMode.NEGATIVE


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_conforms(api_schema: Any, mode: GenerationMode) -> None:
    failures: list[str] = []
    operations = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()
        operations += 1
        try:
            _fuzz(api_schema, operation, mode)
        except (Exception, BaseExceptionGroup) as exc:  # collect every operation's failure
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert operations >= 5
    assert not failures, "\n\n".join(failures)


def test_document_is_valid_openapi_31(fuzz_app: Flask) -> None:
    from jsonschema import Draft202012Validator

    doc = fuzz_app.test_client().get("/openapi.json").get_json()
    assert doc["openapi"] == "3.1.0"
    # Every schema in it must itself be a valid JSON Schema 2020-12 document.
    for name, component in doc["components"]["schemas"].items():
        Draft202012Validator.check_schema(component), name
    assert len({(s.method, s.rule) for s in REGISTRY}) == len(REGISTRY)  # no route declared twice


def test_contract_declarations_reach_the_document(fuzz_app: Flask) -> None:
    doc = fuzz_app.test_client().get("/openapi.json").get_json()
    ingest = doc["paths"]["/memory/ingest"]["post"]
    assert ingest["x-capability"] == "memory:write" and ingest["security"] == [{"bearer": []}]
    assert ingest["x-rate-limit-class"] == "ingest"
    assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in ingest["parameters"])
    assert {"401", "403", "409", "413", "415", "422", "429"} <= set(ingest["responses"])
    health = doc["paths"]["/health"]["get"]
    assert "security" not in health and "429" not in health["responses"] and "401" not in health["responses"]
    assert doc["paths"]["/memory/jobs/{job_id}"]["get"]["x-rate-limit-class"] == "jobs"


def test_unknown_rate_class_is_refused_at_declaration() -> None:
    from flask import Blueprint

    from api.contract import endpoint

    with pytest.raises(ValueError, match="rate class"):
        endpoint(Blueprint("typo", __name__), "/x", "GET", summary="x", capability=None, rate_limit="qeury")
