"""Loading a job on behalf of a tenant: another tenant's job does not exist for the caller."""

from __future__ import annotations

from jobstream import observability
from jobstream.domain import JobRecord
from jobstream.protocol.errors import ErrorKind, invalid_params
from jobstream.runtime import Runtime


def load_owned_job(
    rt: Runtime, tenant: str, job_id: str, *, cancel_route: bool = False
) -> JobRecord:
    observability.bind(job_id=job_id or None)
    record = rt.store.get_job(job_id) if job_id else None
    return _owned(record, tenant, job_id, cancel_route=cancel_route)


def load_owned_job_and_event_at(
    rt: Runtime, tenant: str, job_id: str, sequence: int | None
) -> tuple[JobRecord, int | None]:
    """The tenant's job and the `at` of its event `sequence`, in one read (for acks)."""
    observability.bind(job_id=job_id or None)
    record, at = rt.store.get_job_and_event_at(job_id, sequence) if job_id else (None, None)
    return _owned(record, tenant, job_id, cancel_route=False), at


def _owned(record: JobRecord | None, tenant: str, job_id: str, *, cancel_route: bool) -> JobRecord:
    if record is None or record.tenant != tenant:
        # The cancel route names the job in its 404, like the reference; reads do not.
        detail = {"reason": "unknown_job", "job_id": job_id} if cancel_route else None
        raise invalid_params("unknown job", kind=ErrorKind.NOT_FOUND, detail=detail)
    observability.bind(correlation_id=record.correlation_id)
    return record
