"""``/openapi.json``: the OpenAPI 3.1 document, assembled from the endpoint registry and pydantic schemas."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify
from pydantic import BaseModel

from api.contract import REGISTRY, EndpointSpec, openapi_path

bp = Blueprint("openapi", __name__)

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "request_id": {"type": ["string", "null"]},
    },
}


def _schema_ref(model: type[BaseModel], components: dict[str, Any], mode: str) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode=mode)  # type: ignore[arg-type]
    for name, sub in schema.pop("$defs", {}).items():
        components[name] = sub
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _query_parameters(model: type[BaseModel], components: dict[str, Any]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        components[name] = sub
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def _operation(spec: EndpointSpec, components: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    path, params = openapi_path(spec.rule)
    op: dict[str, Any] = {"operationId": spec.operation_id, "summary": spec.summary, "tags": [spec.tag]}
    if spec.query is not None:
        params += _query_parameters(spec.query, components)
    if params:
        op["parameters"] = params
    if spec.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _schema_ref(spec.body, components, "validation")}},
        }
    elif spec.raw_body:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": {}}}}
    responses: dict[str, Any] = {}
    for status, (description, model) in sorted(spec.responses.items()):
        entry: dict[str, Any] = {"description": description}
        if model is not None:
            entry["content"] = {"application/json": {"schema": _schema_ref(model, components, "serialization")}}
        responses[str(status)] = entry
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    errors = {"400": "bad request", "404": "not found", "405": "method not allowed", "406": "not acceptable",
              "500": "internal error", "503": "dependency unavailable"}
    if spec.body is not None or spec.raw_body:
        errors |= {"413": "body too large", "415": "not JSON"}
    if spec.raw_body:  # signed deliveries (webhooks) check their signature themselves
        errors["401"] = "signature missing or invalid"
    if spec.capability is not None:
        errors |= {"401": "not authenticated", "403": "capability or project missing"}
        op["security"] = [{"bearer": []}]
        op["x-capability"] = spec.capability
    if spec.rate_limit is not None:
        errors["429"] = "rate limited (see Retry-After and X-RateLimit-* headers)"
        op["x-rate-limit-class"] = spec.rate_limit
    if spec.idempotent:
        errors |= {"409": "a request with this Idempotency-Key is still running",
                   "422": "this Idempotency-Key was used with a different request"}
        op.setdefault("parameters", []).append({
            "name": "Idempotency-Key", "in": "header", "required": False,
            "description": "Replays the first response for 24 hours when the same request is sent again.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[!-~]+$"},
        })
    for code, description in errors.items():
        responses.setdefault(code, {"description": description, "content": problem})
    op["responses"] = responses
    return path, op


def build_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document for every registered endpoint."""
    components: dict[str, Any] = {"Problem": PROBLEM_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for spec in REGISTRY:
        path, op = _operation(spec, components)
        paths.setdefault(path, {})[spec.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "poimen-memory",
            "version": "0.1.0",
            "description": "Memory service for engineering teams and their agents. Errors are RFC 9457 problems.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "An OIDC JWT or an API key (pmk_...)"}
            },
        },
    }


@bp.get("/openapi.json")
def openapi_json():  # type: ignore[no-untyped-def]
    """The API description."""
    return jsonify(build_openapi())
