"""Job reads (capabilities, get, list) and cancellation."""

from __future__ import annotations

from typing import Any, Final

from jobstream.domain import ACTIVE_STATUSES, JobRecord
from jobstream.jobtypes import registry
from jobstream.lifecycle import transitions
from jobstream.lifecycle.identity import derive_job_id
from jobstream.lifecycle.log import apply_until_settled, reconcile
from jobstream.protocol import documents
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.pages import fill_page
from jobstream.protocol.queries import JobListQuery, Query, parse_list_query
from jobstream.runtime import Runtime
from jobstream.service.ownership import load_owned_job
from jobstream.store.ports import InvalidCursorError, JobQuery, decode_cursor, encode_cursor

# Cancel retries when a concurrent writer (worker, sweep, another cancel) moves the job first.
MAX_CANCEL_ATTEMPTS: Final = 8


def capabilities(rt: Runtime) -> dict[str, Any]:
    settings = rt.settings
    return documents.capabilities(
        job_types=registry.job_types(),
        queued_timeout_ms=settings.queued_timeout_ms,
        stall_timeout_ms=settings.stall_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        default_deadline_ms=rt.targets().longest_ceiling_ms(settings.default_deadline_ms),
        now=rt.clock(),
    )


def get_job(rt: Runtime, tenant: str, job_id: str, base_url: str | None) -> dict[str, Any]:
    return documents.job_document(
        load_owned_job(rt, tenant, job_id), rt.clock(), base_url, words=registry
    )


def list_jobs(rt: Runtime, tenant: str, query: Query, base_url: str | None) -> dict[str, Any]:
    filters = parse_list_query(query)
    now = rt.clock()
    if filters.idempotency_key is not None:
        record = rt.store.get_job(derive_job_id(tenant, filters.idempotency_key))
        matches = record is not None and _matches(record, tenant, filters.idempotency_key, filters)
        return documents.job_page(
            [record] if matches and record else [],
            next_cursor=None,
            now=now,
            base_url=base_url,
            words=registry,
        )
    start_key = None
    if filters.cursor is not None:
        start_key = decode_cursor(filters.cursor)
        if start_key is None:
            raise invalid_params(
                "cursor must be a cursor this API returned", detail={"field": "cursor"}
            )
    try:
        listing = rt.store.iter_jobs(
            JobQuery(
                tenant=tenant,
                correlation_id=filters.correlation_id,
                status=filters.status,
                limit=filters.limit,
                start_key=start_key,
            )
        )
    except InvalidCursorError:
        raise invalid_params(
            "cursor must be a cursor this API returned", detail={"field": "cursor"}
        ) from None
    # Bounded by bytes as well as by `limit`: the page ends where the next job would not fit
    # in a Lambda response, and its cursor resumes after the last job it shows. When the
    # listing's read budget ran out first, the cursor resumes where the reading stopped.
    taken, cut = fill_page(
        listing,
        lambda listed: documents.job_document(listed.record, now, base_url, words=registry),
        max_count=filters.limit,
    )
    resume_key = taken[-1][0].resume_key if cut and taken else listing.resume_key
    next_cursor = encode_cursor(resume_key) if resume_key is not None else None
    return documents.job_page(
        [listed.record for listed, _ in taken],
        next_cursor=next_cursor,
        now=now,
        base_url=base_url,
        words=registry,
    )


def _matches(record: JobRecord, tenant: str, key: str, filters: JobListQuery) -> bool:
    return (
        record.tenant == tenant
        and record.idempotency_key == key
        and (filters.correlation_id is None or record.correlation_id == filters.correlation_id)
        and (filters.status is None or record.status == filters.status)
    )


def cancel(rt: Runtime, tenant: str, job_id: str, base_url: str | None) -> dict[str, Any]:
    """Cancel a queued or running job; a terminal job is returned unchanged (idempotent)."""
    record = reconcile(rt, load_owned_job(rt, tenant, job_id, cancel_route=True), base_url)

    def decide(current: JobRecord) -> transitions.Transition | None:
        # A terminal job is returned unchanged.
        if current.status not in ACTIVE_STATUSES:
            return None
        return transitions.cancel(current, clock=rt.clock())

    def reread(job_id: str, _: object) -> JobRecord | None:
        fresh = rt.store.get_job(job_id)
        return reconcile(rt, fresh, base_url) if fresh is not None else None

    settled = apply_until_settled(
        rt, record, decide, reread=reread, attempts=MAX_CANCEL_ATTEMPTS, base_url=base_url
    )
    return documents.job_document(settled.record, rt.clock(), base_url, words=registry)
