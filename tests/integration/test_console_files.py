"""The console's files through the template's routes and the JobsFunction handler, as API Gateway
would call it: no token, strict headers, ETags, a redirect to the slash, and no path that leaves
the console's folder."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.http.console import CONTENT_SECURITY_POLICY, INDEX, STATIC, static_files
from jobstream.runtime import Runtime
from jobstream_local.child import REPOSITORY
from tests.support.harness import _http_api
from tests.support.lambda_events import lambda_context
from tests.support.validation import validate_error

EXPECTED_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def get(target: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """GET through the template's routes, with no Authorization header."""
    return _http_api().invoke("GET", target, {"host": "api.example.test", **(headers or {})}, b"")


def error_of(response: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(response["body"])
    validate_error(body)
    return body


def test_the_console_is_served_at_its_slash_without_a_token() -> None:
    response = get("/console/")
    assert response["statusCode"] == 200
    headers = response["headers"]
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="js/app.js">' in response["body"]
    assert response["body"] == (STATIC / "index.html").read_text(encoding="utf-8")


def test_every_answer_carries_the_strict_headers() -> None:
    assert CONTENT_SECURITY_POLICY == EXPECTED_POLICY
    for target in ("/console", "/console/", "/console/js/app.js", "/console/console.css"):
        headers = get(target)["headers"]
        assert headers["content-security-policy"] == EXPECTED_POLICY, target
        assert headers["x-content-type-options"] == "nosniff", target
        assert headers["referrer-policy"] == "no-referrer", target
        assert headers["cache-control"] == "no-cache", target


def test_without_its_slash_the_console_redirects_to_it() -> None:
    response = get("/console")
    assert response["statusCode"] == 301
    # Relative: behind a stage's path prefix the browser stays under it.
    assert response["headers"]["location"] == "console/"
    assert response["body"] == ""


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("index.html", "text/html; charset=utf-8"),
        ("console.css", "text/css; charset=utf-8"),
        ("js/app.js", "text/javascript; charset=utf-8"),
        ("js/views/job.js", "text/javascript; charset=utf-8"),
    ],
)
def test_each_file_has_its_content_type(name: str, content_type: str) -> None:
    response = get(f"/console/{name}")
    assert response["statusCode"] == 200
    assert response["headers"]["content-type"] == content_type
    assert response["body"] == (STATIC / name).read_text(encoding="utf-8")
    assert response["isBase64Encoded"] is False


def test_an_unchanged_file_is_a_304_by_its_etag() -> None:
    first = get("/console/js/app.js")
    etag = first["headers"]["etag"]
    assert re.fullmatch(r'"[0-9a-f]{32}"', etag)
    for if_none_match in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = get("/console/js/app.js", {"if-none-match": if_none_match})
        assert again["statusCode"] == 304, if_none_match
        assert again["body"] == ""
        assert again["headers"]["etag"] == etag
    changed = get("/console/js/app.js", {"if-none-match": '"another-version"'})
    assert changed["statusCode"] == 200
    # Each file has its own.
    assert get("/console/console.css")["headers"]["etag"] != etag


@pytest.mark.parametrize(
    "target",
    [
        "/console/nope.html",
        "/console/js/",
        "/console/js/nope.js",
        "/console/__init__.py",
        "/console/static/index.html",
        "/console/../template.yaml",
        "/console/..%2F__init__.py",
        "/console/%2e%2e/%2e%2e/api.py",
        "/console/..%252F__init__.py",
        "/console/js/../../__init__.py",
        "/console//etc/passwd",
        "/console/%2Fetc%2Fpasswd",
        "/console/js%5C..%5C..%5C__init__.py",
        "/console/index.html%00.js",
    ],
)
def test_an_unknown_or_escaping_path_is_a_404_envelope(target: str) -> None:
    response = get(target)
    assert response["statusCode"] == 404, target
    assert error_of(response)["error"]["detail"]["reason"] == "unknown_route"


# Names a request may carry in `{proxy+}` (after API Gateway's decoding): anything at all.
names = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(["..", ".", "", "js", "views", "%2e%2e", "__init__.py", "static"]))
    .map("/".join)
    .filter(bool),
)


@given(name=names)
def test_no_name_reaches_a_file_outside_the_console_folder(name: str) -> None:
    event = {
        "version": "2.0",
        "routeKey": "GET /console/{proxy+}",
        "rawPath": f"/console/{name}",
        "headers": {},
        "pathParameters": {"proxy": name},
        "requestContext": {"http": {"method": "GET", "path": f"/console/{name}"}},
    }
    route = next(r for r in _http_api().routes if r.route.route_key == "GET /console/{proxy+}")
    response = route.handler(event, lambda_context())
    if response["statusCode"] == 200:
        # Only a file of the folder, under the name it is listed by.
        assert response["body"] == static_files()[unquote(name) or INDEX].body
    else:
        assert response["statusCode"] == 404


def test_the_jobs_function_reads_no_file_when_it_is_imported() -> None:
    # Its cold start serves the API too: the console's files are read on the first request.
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('app', 'functions/jobs/app.py')\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "from jobstream.http import console\n"
        "print(console.static_files.cache_info().currsize)\n"
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "0"


def test_the_console_answers_where_the_job_api_is_unconfigured() -> None:
    # No runtime here: the job routes say the deployment is misconfigured, the page still loads
    # (and its data calls then show that answer).
    assert get("/jobs")["statusCode"] == 503
    assert get("/console/")["statusCode"] == 200


def test_other_routes_still_need_their_token(rt: Runtime) -> None:
    response = get("/jobs")
    assert response["statusCode"] == 401
    assert error_of(response)["error"]["code"] == "auth_error"


@pytest.mark.parametrize(
    ("path", "route_key", "parameters"),
    [
        ("/console", "GET /console", {}),
        # API Gateway routes a trailing slash to the route without it; the raw path keeps it.
        ("/console/", "GET /console", {}),
        ("/jobs/", "GET /jobs", {}),
        ("/jobs/j1/events/", "GET /jobs/{job_id}/events", {"job_id": "j1"}),
        # A greedy variable takes one segment or more, after every route without one.
        ("/console/index.html", "GET /console/{proxy+}", {"proxy": "index.html"}),
        ("/console/js/views/job.js", "GET /console/{proxy+}", {"proxy": "js/views/job.js"}),
        ("/consoles", "$default", {}),
    ],
)
def test_the_local_gateway_routes_as_api_gateway_does(
    path: str, route_key: str, parameters: dict[str, str]
) -> None:
    matched = _http_api().match("GET", path)
    assert matched is not None
    bound, found = matched
    assert (bound.route.route_key, found) == (route_key, parameters)
