"""POST /jobs/{job_id}/events/ack: move the consumer's ack cursor; POST /events/ack: move a
named cursor of the tenant's feed; POST /callbacks/redrive: send the tenant's dead callbacks
again; POST /callbacks/endpoints/enable: re-enable one of its endpoints."""

from __future__ import annotations

from jobstream.http.api import RouteResult, http_handler
from jobstream.http.request import Request
from jobstream.runtime import Runtime
from jobstream.service import deliveries, events, feed


def ack(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    job_id = request.path_parameter("job_id")
    return 200, events.acknowledge(rt, tenant, job_id, request.json_body(), request.base_url)


def feed_ack(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, feed.acknowledge(rt, tenant, request.json_body())


def enable_endpoint(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, deliveries.enable_endpoint(rt, tenant, request.json_body())


def redrive(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, deliveries.redrive(rt, tenant, request.json_body())


handler = http_handler(
    {
        "POST /jobs/{job_id}/events/ack": ack,
        "POST /events/ack": feed_ack,
        "POST /callbacks/redrive": redrive,
        "POST /callbacks/endpoints/enable": enable_endpoint,
    }
)
