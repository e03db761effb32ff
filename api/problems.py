"""Errors as ``application/problem+json`` (RFC 9457), and the handlers that make every error one.

No response ever carries a stack trace, SQL or a file-system path: unexpected exceptions become a generic
500 problem with the request id, and the details go to the JSON log.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, g, json
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)

PROBLEM_BASE = "https://poimen.dev/problems/"
PROBLEM_JSON = "application/problem+json"


class Problem(Exception):
    """An HTTP error with a machine-readable type and a human-readable detail."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        type_: str | None = None,
        title: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.type = type_ or _default_type(status)
        self.title = title or _TITLES.get(status, "Error")
        self.headers = headers or {}
        self.extra = extra


_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _default_type(status: int) -> str:
    return PROBLEM_BASE + _TITLES.get(status, "error").lower().replace(" ", "-")


def problem_response(problem: Problem) -> Response:
    """Render a problem as a JSON response."""
    body: dict[str, Any] = {
        "type": problem.type,
        "title": problem.title,
        "status": problem.status,
        "detail": problem.detail,
        "request_id": getattr(g, "request_id", None),
        **problem.extra,
    }
    response = Response(json.dumps(body), status=problem.status, mimetype=PROBLEM_JSON)
    for key, value in problem.headers.items():
        response.headers[key] = value
    return response


def install_error_handlers(app: Flask) -> None:
    """Make every error a problem+json response."""

    @app.errorhandler(Problem)
    def _problem(exc: Problem) -> Response:
        return problem_response(exc)

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        status = exc.code or 500
        detail = exc.description or _TITLES.get(status, "error")
        if status == 413:
            detail = "the request body is larger than this endpoint accepts"
        headers = {}
        if status == 405 and exc.get_response().headers.get("Allow"):
            headers["Allow"] = exc.get_response().headers["Allow"]
        return problem_response(Problem(status, detail, headers=headers))

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error")
        return problem_response(Problem(500, "an internal error occurred; quote the request id when reporting it"))
