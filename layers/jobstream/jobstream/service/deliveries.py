"""A consumer's view of its own callbacks (an extension of v1): how each was delivered, its
dead letters, and asking for them again. Never another tenant's."""

from __future__ import annotations

from typing import Any, Final

from jobstream import observability
from jobstream.domain import CallbackRecord, CallbackState
from jobstream.protocol.deliveries import (
    callback_page,
    decode_callbacks_cursor,
    enable_result,
    encode_callbacks_cursor,
    endpoint_list,
    job_deliveries,
    parse_callbacks_query,
    parse_enable_body,
    parse_redrive_body,
    redrive_result,
)
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.queries import Query
from jobstream.runtime import Runtime
from jobstream.service import endpoints
from jobstream.service.ownership import load_owned_job
from jobstream.store.ports import TenantCallbacks


def job_callbacks(rt: Runtime, tenant: str, job_id: str) -> dict[str, Any]:
    """Every callback of the tenant's job, with its delivery state (404 for another's job)."""
    record = load_owned_job(rt, tenant, job_id)
    callbacks = rt.callbacks.of_job(job_id, since=record.created_at) if record.callback_url else []
    endpoint = endpoints.endpoint_of(tenant, record.callback_url)
    health = rt.endpoints.get(endpoint) if endpoint is not None else None
    return job_deliveries(record, callbacks, rt.clock(), health)


# Dead callbacks one redrive request revives at most (then `more`: the consumer calls again).
REDRIVE_BATCH: Final = 1000
_READ: Final = 100


# Each listing's store list.
_LISTS: Final = {"dead": TenantCallbacks.DEAD, "pending": TenantCallbacks.PENDING}


def listed_callbacks(rt: Runtime, tenant: str, query: Query) -> dict[str, Any]:
    """The tenant's dead (or pending) callbacks, a page at a time."""
    state, limit, cursor = parse_callbacks_query(query)
    listed = _LISTS[state]
    start = None
    if cursor is not None:
        start = decode_callbacks_cursor(tenant, cursor)
        if not rt.callbacks.is_start_key(tenant, listed, start):
            raise invalid_params(
                "cursor must be a cursor this API returned for this consumer",
                detail={"field": "cursor"},
            )
    records, after = rt.callbacks.of_tenant(tenant, listed, start=start, limit=limit)
    next_cursor = encode_callbacks_cursor(tenant, after) if after is not None else None
    return callback_page(records, next_cursor=next_cursor, now=rt.clock())


def redrive(rt: Runtime, tenant: str, body: Any) -> dict[str, Any]:
    """Give the tenant's dead callbacks (all, one job's, or those dead since a time) a fresh
    budget; the dispatcher sends each again (no request path sends)."""
    job_id, since = parse_redrive_body(body)
    now = rt.clock()
    if job_id is not None:
        record = load_owned_job(rt, tenant, job_id)
        dead = [
            callback
            for callback in rt.callbacks.of_job(job_id, since=record.created_at)
            if callback.state == CallbackState.DEAD
        ]
        revived = sum(_revive(rt, callback, now) for callback in dead)
        return redrive_result(revived, more=False, now=rt.clock())
    revived = 0
    start = None
    # At most REDRIVE_BATCH entries read a request: every one it reads it may revive (the
    # `since` bound is the index query's, the older dead are never read), so it is bounded.
    for _ in range(REDRIVE_BATCH // _READ):
        records, start = rt.callbacks.of_tenant(
            tenant, TenantCallbacks.DEAD, start=start, limit=_READ, dead_since=since
        )
        revived += sum(_revive(rt, callback, now) for callback in records)
        if start is None:
            return redrive_result(revived, more=False, now=rt.clock())
    return redrive_result(revived, more=True, now=rt.clock())


def _revive(rt: Runtime, callback: CallbackRecord, now: int) -> int:
    # None: no longer dead (delivered or revived meanwhile): not this request's to count.
    revived = rt.callbacks.revive(callback, now=now, by_dispatcher=True)
    if revived is not None:
        observability.count("callbacks_redriven")
    return 0 if revived is None else 1


def tenant_endpoints(rt: Runtime, tenant: str) -> dict[str, Any]:
    """The health of the tenant's callback endpoints (those ever recorded)."""
    return endpoint_list(rt.endpoints.of_tenant(tenant), rt.clock())


def enable_endpoint(rt: Runtime, tenant: str, body: Any) -> dict[str, Any]:
    """The tenant re-enables one of its endpoints (disabled by a 410, or paused): it resumes now
    and the next sweep sends its backlog, oldest first. Never another tenant's: the endpoint is
    the caller's own (tenant, origin)."""
    endpoint = endpoints.endpoint_of(tenant, parse_enable_body(body))
    if endpoint is None:
        raise invalid_params(
            "origin must be an http(s) origin, such as https://host:port",
            detail={"field": "origin"},
        )
    enabled = endpoints.enable(rt, endpoint, drain_now=False)
    return enable_result(rt.endpoints.get(endpoint), enabled=enabled, now=rt.clock())
