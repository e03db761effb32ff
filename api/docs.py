"""``/docs``: Swagger UI over ``/openapi.json``, served entirely from this process.

The Swagger UI assets come from the ``flask-swagger-ui`` wheel, which vendors the upstream ``dist`` build
(only its files are used, not its blueprint: that one configures the UI with an inline script, which the
page's Content-Security-Policy forbids). No CDN is contacted; the page runs only scripts from this origin.
"""

from __future__ import annotations

from pathlib import Path

import flask_swagger_ui
from flask import Blueprint, Response, abort, send_from_directory, url_for

bp = Blueprint("docs", __name__)

ASSETS = Path(flask_swagger_ui.__file__).resolve().parent / "dist"
# Only what the page loads; everything else in the package stays unserved.
SERVED_ASSETS = frozenset({"swagger-ui.css", "index.css", "swagger-ui-bundle.js", "favicon-32x32.png",
                           "favicon-16x16.png", "LICENSE"})

# Scripts and styles from this origin only, nothing inline; Swagger UI draws its icons as data: images and
# talks to /openapi.json and the API itself (connect-src 'self'). Checked in headless Chromium: the page and
# an expanded operation render fully under this policy (React sets styles through the CSSOM, which
# style-src does not restrict).
DOCS_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
            "form-action 'none'")

INIT_JS = """\
// Swagger UI bootstrap, loaded as a file so the page needs no inline script.
window.addEventListener("load", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.specUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    persistAuthorization: false,
    tryItOutEnabled: false
  });
});
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>poimen-memory API</title>
  <link rel="stylesheet" href="{css}">
  <link rel="stylesheet" href="{index_css}">
  <link rel="icon" type="image/png" href="{icon}" sizes="32x32">
</head>
<body>
  <div id="swagger-ui" data-spec-url="{spec}"></div>
  <script src="{bundle}"></script>
  <script src="{init}"></script>
</body>
</html>
"""


def _with_csp(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = DOCS_CSP
    return response


@bp.get("/docs")
def page() -> Response:
    """The interactive API documentation."""
    html = PAGE.format(
        css=url_for("docs.asset", name="swagger-ui.css"),
        index_css=url_for("docs.asset", name="index.css"),
        icon=url_for("docs.asset", name="favicon-32x32.png"),
        spec=url_for("openapi.openapi_json"),
        bundle=url_for("docs.asset", name="swagger-ui-bundle.js"),
        init=url_for("docs.init_script"),
    )
    return _with_csp(Response(html, mimetype="text/html"))


@bp.get("/docs/init.js")
def init_script() -> Response:
    """The script that starts Swagger UI on the page."""
    return _with_csp(Response(INIT_JS, mimetype="text/javascript"))


@bp.get("/docs/assets/<name>")
def asset(name: str) -> Response:
    """One vendored Swagger UI file (an allow-list, so nothing else on disk can be reached)."""
    if name not in SERVED_ASSETS:
        abort(404)
    response = send_from_directory(ASSETS, name, max_age=3600)
    response.headers["Cache-Control"] = "public, max-age=3600"
    return _with_csp(response)
