"""POST /jobs: admit a Task."""

from __future__ import annotations

from jobstream.http.api import RouteResult, http_handler
from jobstream.http.request import Request
from jobstream.runtime import Runtime
from jobstream.service import admission


def submit(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return admission.submit(rt, tenant, request.json_body(), request.base_url)


handler = http_handler({"POST /jobs": submit})
