"""Liveness verdicts: queued too long, stalled without heartbeats, past the deadline."""

from __future__ import annotations

from jobstream import observability
from jobstream.config.settings import Settings
from jobstream.domain import ACTIVE_STATUSES, JobChange, JobRecord, JobStatus
from jobstream.protocol.errors import REASON_MESSAGES, Reason
from jobstream.protocol.events import EventKind
from jobstream.service.runtime import Runtime
from jobstream.service.stream import record_transition
from jobstream.store.jobs import StaleJobError, StateChange


def verdict(record: JobRecord, now: int, settings: Settings) -> Reason | None:
    """The verdict the job's state earns at `now`, if any. Pure."""
    if record.status not in ACTIVE_STATUSES:
        return None
    if record.deadline_at is not None and now >= record.deadline_at:
        return Reason.EXECUTION_TIMEOUT
    if record.status is JobStatus.QUEUED and now - record.created_at >= settings.queued_timeout_ms:
        return Reason.QUEUED_TOO_LONG
    if record.status is JobStatus.RUNNING and not record.lease_active(now):
        last_sign_of_life = record.heartbeat_at or record.started_at or record.created_at
        if now - last_sign_of_life >= settings.stall_timeout_ms:
            return Reason.STALLED_NO_HEARTBEAT
    return None


def expire(rt: Runtime, record: JobRecord, reason: Reason, now: int) -> JobRecord | None:
    """End the job `expired` with its terminal event; None when the job moved on first."""
    at = max(now, record.updated_at)
    change = StateChange(
        JobChange(
            {
                "status": JobStatus.EXPIRED,
                "reason": reason.value,
                "reason_message": REASON_MESSAGES[reason],
                "updated_at": at,
                "lease_owner": None,
                "lease_expires_at": None,
            }
        ),
        require_status=frozenset({record.status}),
        # A stall verdict never overrules a live lease; the deadline is hard and does.
        require_lease_expired_at=now if reason is Reason.STALLED_NO_HEARTBEAT else None,
    )
    try:
        ended = record_transition(rt, record, kind=EventKind.OUTCOME_EXPIRED, change=change)
    except StaleJobError:
        return None
    observability.count("verdicts", dimension=reason.value)
    return ended
