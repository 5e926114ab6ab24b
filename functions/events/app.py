"""GET /jobs/{job_id}/events: a page of the job's event stream; GET /events: the tenant's feed."""

from __future__ import annotations

from jobstream.http.api import RouteResult, http_handler
from jobstream.http.request import Request
from jobstream.runtime import Runtime
from jobstream.service import events, feed


def page(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    job_id = request.path_parameter("job_id")
    return 200, events.events_page(rt, tenant, job_id, request.query, request.base_url)


def feed_page(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, feed.feed_page(rt, tenant, request.query, request.base_url)


handler = http_handler({"GET /jobs/{job_id}/events": page, "GET /events": feed_page})
