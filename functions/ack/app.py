"""POST /jobs/{job_id}/events/ack: move the consumer's ack cursor."""

from __future__ import annotations

from jobstream.http.api import RouteResult, http_handler
from jobstream.http.request import Request
from jobstream.runtime import Runtime
from jobstream.service import events


def ack(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    job_id = request.path_parameter("job_id")
    return 200, events.acknowledge(rt, tenant, job_id, request.json_body(), request.base_url)


handler = http_handler({"POST /jobs/{job_id}/events/ack": ack})
