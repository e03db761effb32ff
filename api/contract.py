"""One decorator per endpoint declares its contract: method, path, capability, request and response schemas.

The same declaration drives authorisation, request validation (pydantic), the rate class (``api.limits``),
``Idempotency-Key`` replay (``api.idempotency``) and the OpenAPI 3.1 document at ``/openapi.json``, so the
description cannot drift from the code. Hand-written rather than taken from a
Flask-OpenAPI extension because the capability and the project check must sit in the same declaration,
and pydantic v2 already emits JSON Schema 2020-12, which is what OpenAPI 3.1 uses.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, request
from pydantic import BaseModel, ValidationError

from api.problems import Problem

MAX_QUERY_PARAM_CHARS = 100_000


@dataclass(frozen=True)
class EndpointSpec:
    """Everything the OpenAPI document says about one operation."""

    method: str
    rule: str
    summary: str
    capability: str | None  # None = open (health, readiness, webhooks that verify signatures themselves)
    tag: str
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    responses: dict[int, tuple[str, type[BaseModel] | None]] = field(default_factory=dict)
    operation_id: str = ""
    raw_body: bool = False  # the handler reads request.get_data() itself (webhooks)
    rate_limit: str | None = None  # a rate class of api.limits.RATE_CLASSES; None = not limited
    idempotent: bool = False  # honours Idempotency-Key (POSTs that create work)
    endpoint: str = ""  # Flask endpoint name, "<blueprint>.<function>"


REGISTRY: list[EndpointSpec] = []
_BY_ENDPOINT: dict[str, EndpointSpec] = {}

# Sentinel: "infer the rate class from the capability and method" (see default_rate_class).
INFER = "infer"


def default_rate_class(method: str, capability: str | None) -> str | None:
    """The rate class of an endpoint that does not name one.

    Open endpoints (health, readiness, signed webhooks) are not limited; admin operations share the admin
    budget; other POSTs that need ``memory:write`` create work (the ingest budget); POSTs that only read
    are queries; GETs are metadata.
    """
    from shared.identity.principal import ADMIN, WRITE

    if capability is None:
        return None
    if capability == ADMIN:
        return "admin"
    if method.upper() != "GET":
        return "ingest" if capability == WRITE else "query"
    return "metadata"


def spec_for_endpoint(endpoint_name: str | None) -> EndpointSpec | None:
    """The contract of a Flask endpoint (``request.endpoint``), or ``None`` for routes outside the registry."""
    return _BY_ENDPOINT.get(endpoint_name or "")


def _format_validation(exc: ValidationError) -> tuple[str, list[dict[str, Any]]]:
    errors = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
        errors.append({"field": loc, "message": err.get("msg", "invalid")})
    first = errors[0] if errors else {"field": "body", "message": "invalid"}
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{first['field']}: {first['message']}{more}", errors


def parse_body(model: type[BaseModel]) -> BaseModel:
    """Validate the JSON request body against ``model`` or raise a 400/415 problem naming what is wrong."""
    if not request.mimetype or request.mimetype != "application/json":
        raise Problem(415, "send the request body as JSON with Content-Type: application/json")
    raw = request.get_data(cache=True)
    if b"\x00" in raw:
        raise Problem(400, "the request body contains a NUL byte")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        detail, errors = _format_validation(exc)
        if any(e["message"].startswith("Invalid JSON") for e in errors) or not raw.strip():
            raise Problem(400, "the request body is not valid JSON", errors=errors) from None
        raise Problem(400, detail, errors=errors) from None


def parse_query(model: type[BaseModel]) -> BaseModel:
    """Validate the query string against ``model`` (repeated keys become lists where the model wants one)."""
    data: dict[str, Any] = {}
    for key in request.args:
        values = request.args.getlist(key)
        for value in values:
            if "\x00" in value or "\x00" in key:
                raise Problem(400, f"query parameter {key!r} contains a NUL byte")
            if len(value) > MAX_QUERY_PARAM_CHARS:
                raise Problem(400, f"query parameter {key!r} is too long")
        field_info = model.model_fields.get(key)
        wants_list = field_info is not None and "list" in str(field_info.annotation).lower()
        if not wants_list and len(values) > 1:
            raise Problem(400, f"query parameter {key!r} may be given only once")
        data[key] = values if wants_list else values[0]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        detail, errors = _format_validation(exc)
        raise Problem(400, detail, errors=errors) from None


def endpoint(
    bp: Blueprint,
    rule: str,
    method: str,
    *,
    summary: str,
    capability: str | None,
    body: type[BaseModel] | None = None,
    query: type[BaseModel] | None = None,
    responses: dict[int, tuple[str, type[BaseModel] | None]] | None = None,
    raw_body: bool = False,
    rate_limit: str | None = INFER,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a view on ``bp`` with its contract.

    The view receives ``body=`` and/or ``query=`` (validated models) as keyword arguments, and
    ``principal=`` when it declares a capability. ``rate_limit`` names a rate class of
    ``api.limits.RATE_CLASSES`` (``None``: unlimited; default: :func:`default_rate_class`).
    ``idempotent=True`` makes a repeated ``Idempotency-Key`` replay the first response
    (``api.idempotency``); use it on every POST that creates work.
    """
    from api.auth import authorize
    from api.idempotency import run_idempotent
    from api.limits import check_rate_class

    rate_class = default_rate_class(method, capability) if rate_limit == INFER else rate_limit
    check_rate_class(rate_class)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        prefix = bp.url_prefix or ""
        spec = EndpointSpec(
            method=method.upper(),
            rule=prefix + rule,
            summary=summary,
            capability=capability,
            tag=bp.name,
            body=body,
            query=query,
            responses=responses or {},
            operation_id=f"{bp.name}_{fn.__name__}",
            raw_body=raw_body,
            rate_limit=rate_class,
            idempotent=idempotent,
            endpoint=f"{bp.name}.{fn.__name__}",
        )
        REGISTRY.append(spec)
        _BY_ENDPOINT[spec.endpoint] = spec

        @functools.wraps(fn)
        def view(**kwargs: Any) -> Any:
            if capability is not None:
                kwargs["principal"] = authorize(capability)
            if query is not None:
                kwargs["query"] = parse_query(query)
            if body is not None:
                kwargs["body"] = parse_body(body)
            if idempotent:
                from api.auth import resolve_principal

                return run_idempotent(resolve_principal().subject, lambda: fn(**kwargs))
            return fn(**kwargs)

        bp.add_url_rule(rule, endpoint=fn.__name__, view_func=view, methods=[method.upper()])
        return view

    return decorate


_RULE_PARAM = re.compile(r"<(?:(?P<conv>[a-z]+):)?(?P<name>\w+)>")


def openapi_path(rule: str) -> tuple[str, list[dict[str, Any]]]:
    """Turn a Flask rule into an OpenAPI path template and its path parameters."""
    params: list[dict[str, Any]] = []

    def repl(m: re.Match[str]) -> str:
        params.append({"name": m["name"], "in": "path", "required": True, "schema": {"type": "string"}})
        return "{" + m["name"] + "}"

    return _RULE_PARAM.sub(repl, rule), params
