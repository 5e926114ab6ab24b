"""The console's files (`GET /console`, `GET /console/{proxy+}`): a fixed set of static files
shipped in the layer (`static/`), answered without a token (the page's data calls carry one)
under a strict Content-Security-Policy, with an ETag.

A request names a file only by looking it up among the files listed once from `static/`: no
path is ever built from the request, so no path can leave that folder. Unknown names get the
404 envelope (the console routes by the URL's fragment, so no other path is one of its pages).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from jobstream.http.api import Response, unknown_route
from jobstream.http.caching import if_none_match_matches, strong_etag
from jobstream.http.request import Request

STATIC: Final = Path(__file__).with_name("static")
INDEX: Final = "index.html"
# Only these kinds of file are served; a file of any other kind in `static/` is never answered
# (a unit test keeps every shipped file among them).
CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml; charset=utf-8",
}
CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS: Final = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
# Revalidated on every load (a 304 while unchanged): a deploy is seen at once, and the page
# never runs a module of one version beside a module of another.
CACHE_CONTROL: Final = "no-cache"


@dataclass(frozen=True, slots=True)
class StaticFile:
    body: str
    content_type: str
    etag: str


@cache
def static_files() -> Mapping[str, StaticFile]:
    """Every servable file of `static/` by its path under it ('js/app.js'); read on the first
    console request, never at import (the function's cold start serves the API too)."""
    found: dict[str, StaticFile] = {}
    for path in sorted(STATIC.rglob("*")):
        content_type = CONTENT_TYPES.get(path.suffix)
        if content_type is None or not path.is_file():
            continue
        data = path.read_bytes()
        found[path.relative_to(STATIC).as_posix()] = StaticFile(
            data.decode("utf-8"), content_type, strong_etag(data)
        )
    return found


def console_file(request: Request) -> Response:
    """The file the request names, a redirect from `/console` to `/console/`, or a 404."""
    name = _requested_name(request)
    if name is None:
        # Relative, so a stage's path prefix is kept: the page's relative URLs need the slash.
        return _answer(301, {"location": "console/"})
    found = static_files().get(name)
    if found is None:
        raise unknown_route(request)
    headers = {"content-type": found.content_type, "etag": found.etag}
    if if_none_match_matches(request.headers.get("if-none-match"), found.etag):
        return _answer(304, headers)
    return _answer(200, headers, found.body)


def _requested_name(request: Request) -> str | None:
    """The file's name under `static/`; None for `/console` without its slash."""
    proxy = request.path_parameter("proxy")
    if proxy:
        return proxy
    # API Gateway routes `/console/` to `GET /console` too; only the raw path tells them apart.
    return INDEX if request.path.endswith("/") else None


def _answer(status: int, headers: Mapping[str, str], body: str = "") -> Response:
    return {
        "statusCode": status,
        "headers": {**SECURITY_HEADERS, "cache-control": CACHE_CONTROL, **headers},
        "body": body,
        "isBase64Encoded": False,
    }
