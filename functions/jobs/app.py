"""Job reads and cancel: capabilities, list, get, cancel, a job's callbacks, the tenant's dead and
pending callbacks and its endpoints; the OpenAPI document; the console's files; unknown routes."""

from __future__ import annotations

from jobstream.http.api import Cacheable, RouteResult, http_handler
from jobstream.http.console import console_file
from jobstream.http.openapi import openapi_document
from jobstream.http.request import Request
from jobstream.runtime import Runtime
from jobstream.service import deliveries, jobs

# A consumer negotiates before each submit and read: it reuses the document this long, then
# revalidates it (a 304 while unchanged); a configuration change shows within it.
CAPABILITIES_MAX_AGE_S = 60


def openapi(request: Request) -> RouteResult:
    return 200, openapi_document()


def capabilities(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, jobs.capabilities(rt)


def list_jobs(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, jobs.list_jobs(rt, tenant, request.query, request.base_url)


def get_job(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, jobs.get_job(rt, tenant, request.path_parameter("job_id"), request.base_url)


def cancel(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    # The cancel body is ignored, whatever it holds.
    return 200, jobs.cancel(rt, tenant, request.path_parameter("job_id"), request.base_url)


def job_callbacks(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, deliveries.job_callbacks(rt, tenant, request.path_parameter("job_id"))


def listed_callbacks(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, deliveries.listed_callbacks(rt, tenant, request.query)


def tenant_endpoints(rt: Runtime, tenant: str, request: Request) -> RouteResult:
    return 200, deliveries.tenant_endpoints(rt, tenant)


handler = http_handler(
    {
        "GET /jobs": list_jobs,
        "GET /jobs/{job_id}": get_job,
        "POST /jobs/{job_id}/cancel": cancel,
        "GET /jobs/{job_id}/callbacks": job_callbacks,
        "GET /callbacks": listed_callbacks,
        "GET /callbacks/endpoints": tenant_endpoints,
    },
    public={"GET /openapi.json": openapi},
    files={"GET /console": console_file, "GET /console/{proxy+}": console_file},
    cacheable={"GET /capabilities": Cacheable(capabilities, CAPABILITIES_MAX_AGE_S)},
)
