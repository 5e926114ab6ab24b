"""GET /jobs/{job_id}/events: a page of the job's event stream."""

from __future__ import annotations

from jobstream.http.api import RouteResult, http_handler
from jobstream.http.request import Request
from jobstream.runtime import Runtime
from jobstream.service import events


def page(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    job_id = request.path_parameter("job_id")
    return 200, events.events_page(rt, tenant, job_id, request.query, request.base_url)


handler = http_handler({"GET /jobs/{job_id}/events": page})
