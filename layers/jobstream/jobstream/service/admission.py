"""`POST /jobs`: validate, apply the target rules, then admit once per idempotency key, within
the tenant's quotas (a replay of an admitted key is never refused by them)."""

from __future__ import annotations

from typing import Any

from jobstream import observability
from jobstream.config.targets import Target
from jobstream.domain import JobRecord, JobStatus
from jobstream.jobtypes import registry
from jobstream.lifecycle import transitions
from jobstream.lifecycle.identity import derive_job_id
from jobstream.lifecycle.log import (
    after_append,
    callback_intent,
    feed_stamp,
    next_event,
    reconcile,
    settle_last_event,
)
from jobstream.lifecycle.retention import has_expired, item_expiry
from jobstream.outbound.guard import check_at_admission
from jobstream.outbound.url import OutboundRefused as CallbackRefused
from jobstream.protocol import documents
from jobstream.protocol.errors import (
    ErrorCode,
    ProtocolError,
    invalid_params,
    quota_exceeded,
    resource_busy,
)
from jobstream.protocol.task import AdmissionRequest
from jobstream.runtime import Runtime
from jobstream.store.ports import (
    NewEvent,
    QuotaCharge,
    QuotaContendedError,
    QuotaExceededError,
    budgets,
)

NEW = 202
REPLAYED = 200


def submit(rt: Runtime, tenant: str, body: Any, base_url: str | None) -> tuple[int, dict[str, Any]]:
    """Admit a Task: 202 with a new job, or 200 with the job its key already names."""
    request, job_type = registry.parse_task(body)
    if request.callback_url is not None:
        _check_callback_url(rt, tenant, request.callback_url)
    target = job_type.select_target(request.parsed, registry.checked_targets(rt.targets()))
    job_id = derive_job_id(tenant, request.idempotency_key)
    observability.bind(job_id=job_id, correlation_id=request.correlation_id)
    existing = rt.store.get_job(job_id)
    if existing is not None and has_expired(existing, rt.clock()):
        # Past its retention the job is gone, and its key free (docs/protocol.md): the new job
        # replaces it, and never reads what TTL has not deleted yet as its own.
        existing = None
    if existing is None:
        quota = _quota_charge(rt, tenant)
        draft = _new_record(rt, tenant, job_id, request, target, counted=quota is not None)
        move = transitions.accept(draft)
        record = move.change.update.applied_to(draft)
        accepted = next_event(record, move.kind, move.at)
        intent = callback_intent(record, accepted, base_url)
        admitted = after_append(record, accepted)
        _check_storable(admitted)
        first = NewEvent(
            accepted,
            expires_at=item_expiry(admitted, rt.settings),
            intent=intent,
            feed_at=feed_stamp(accepted, rt.clock()),
        )
        if _create(rt, admitted, first, quota):
            # The job and its callback go to their queues from the table's stream
            # (service/dispatcher.py): admission waits for no send.
            observability.count("events_recorded", dimension=accepted.kind)
            observability.count("admitted")
            return NEW, documents.submission(admitted, rt.clock(), base_url, words=registry)
        # Another request admitted the same key first, or this one did and the answer to its
        # write was lost (the retry then found the job): either way it is a replay.
        existing = rt.store.get_job(job_id)
        if existing is None or has_expired(existing, rt.clock()):
            raise RuntimeError(f"job {job_id} vanished during admission")
    return _replay(rt, existing, request, target, base_url)


def _replay(
    rt: Runtime,
    existing: JobRecord,
    request: AdmissionRequest,
    target: Target | None,
    base_url: str | None,
) -> tuple[int, dict[str, Any]]:
    """200 with the job the Task's key names, when the Task is the one that admitted it."""
    _check_replay(existing, request, target)
    if existing.event_count == 1:
        # The admission this replays may have died between its two writes: its retry writes
        # the first event it described (with its callback and its correlation entry) now,
        # not at the claim or the sweep's (one consistent read of the event, 1 read unit).
        settle_last_event(rt, existing)
    record = reconcile(rt, existing, base_url)
    observability.count("replayed")
    return REPLAYED, documents.submission(record, rt.clock(), base_url, words=registry)


def _quota_charge(rt: Runtime, tenant: str) -> QuotaCharge | None:
    """What a new job takes of its tenant's quotas; None when it has none (and pays nothing)."""
    config = rt.tenant(tenant)
    quotas = config.quotas if config is not None else None
    if quotas is None or not quotas.limited:
        return None
    return QuotaCharge(
        tenant=tenant,
        now_ms=rt.clock(),
        max_open_jobs=quotas.max_open_jobs,
        admissions_per_minute=quotas.admissions_per_minute,
    )


def _create(rt: Runtime, record: JobRecord, first: NewEvent, quota: QuotaCharge | None) -> bool:
    """Write the new job (False: its key names a job already); over a quota it is a 429 and
    nothing is written."""
    try:
        return rt.store.create_job(
            record, first, now_s=record.created_at // 1000, quota=quota, clock=rt.clock
        )
    except QuotaExceededError as refusal:
        if _admitted_meanwhile(rt, record.job_id):
            # The same key admitted by a racing request: a replay, which no quota refuses.
            return False
        # Counted as `rejected` with its code, like every refusal (http/api.py).
        raise quota_exceeded(refusal.quota, refusal.limit, refusal.retry_after_s) from None
    except QuotaContendedError:
        # Admissions raced on the tenant's counter through every try: busy, not over quota.
        raise resource_busy() from None


def _admitted_meanwhile(rt: Runtime, job_id: str) -> bool:
    existing = rt.store.get_job_item(job_id)
    return existing is not None and not has_expired(existing, rt.clock())


def _check_callback_url(rt: Runtime, tenant: str, url: str) -> None:
    """A refused callback URL is a 400 and nothing is written.

    Only what the URL itself says is checked here: syntax, scheme, the tenant's allowed origins
    and a literal IP address. No DNS: an answer is not a property of the Task (a transient DNS
    failure must not refuse a valid one) and an outsider controls how long it takes. Delivery
    resolves, checks every address and pins the connection to them.
    """
    config = rt.tenant(tenant)
    if config is None:
        # Removed between authentication and now: as if the token had been refused.
        raise ProtocolError(ErrorCode.AUTH_ERROR, "missing or invalid bearer token")
    try:
        check_at_admission(url, config.origins)
    except CallbackRefused as refusal:
        raise invalid_params(
            f"callback_url is not allowed: {refusal.message}",
            detail={
                "field": "callback_url",
                "reason": "callback_url_refused",
                "refusal": refusal.reason,
            },
        ) from None


def _check_storable(record: JobRecord) -> None:
    """A job DynamoDB could not store, or that leaves no room for its result within the item
    limit, is a 400 and nothing is written (`store/budgets.py`)."""
    size = budgets.admitted_job_size(record)
    if size > budgets.ADMITTED_JOB_BYTES:
        raise invalid_params(
            f"the Task is too large to store: its job would take {size} bytes "
            f"(labels, params, ids and callback_url), at most {budgets.ADMITTED_JOB_BYTES}",
            detail={
                "reason": "task_too_large",
                "size_bytes": size,
                "limit_bytes": budgets.ADMITTED_JOB_BYTES,
            },
        )
    refusal = budgets.unstorable_number(record)
    if refusal is not None:
        raise invalid_params(
            f"the Task holds a number that cannot be stored: {refusal}",
            detail={"reason": "unstorable_number"},
        )


def _new_record(
    rt: Runtime,
    tenant: str,
    job_id: str,
    request: AdmissionRequest,
    target: Target | None,
    *,
    counted: bool,
) -> JobRecord:
    now = rt.clock()
    default_ms = rt.settings.default_deadline_ms
    ceiling = target.ceiling_ms(default_ms) if target is not None else default_ms
    budget = min(request.deadline_ms, ceiling) if request.deadline_ms is not None else ceiling
    return JobRecord(
        job_id=job_id,
        tenant=tenant,
        job_type=request.job_type,
        idempotency_key=request.idempotency_key,
        params=request.parsed.params,
        params_canonical=request.parsed.canonical,
        target_id=_target_id(target),
        status=JobStatus.QUEUED,
        created_at=now,
        updated_at=now,
        deadline_at=now + budget,
        correlation_id=request.correlation_id,
        labels=request.labels,
        callback_url=request.callback_url,
        quota_counted=counted,
    )


def _target_id(target: Target | None) -> str:
    # A job of a type without targets has none: its record names the empty id.
    return target.id if target is not None else ""


def _check_replay(existing: JobRecord, request: AdmissionRequest, target: Target | None) -> None:
    detail = {"reason": "idempotency_conflict", "job_id": existing.job_id}
    if existing.idempotency_key != request.idempotency_key:
        raise ProtocolError(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            f"idempotency key '{request.idempotency_key}' collides with an existing job",
            detail=detail,
        )
    if existing.target_id != _target_id(target):
        raise ProtocolError(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "idempotency key already belongs to a job for another target",
            detail=detail,
        )
    if existing.params_canonical != request.parsed.canonical:
        raise ProtocolError(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "idempotency key was first used with different params",
            detail=detail,
        )
