"""Liveness verdicts: queued too long, stalled without heartbeats, past the deadline."""

from __future__ import annotations

from typing import Final

from jobstream import observability
from jobstream.config.settings import Settings
from jobstream.domain import ACTIVE_STATUSES, JobRecord, JobStatus
from jobstream.lifecycle import transitions
from jobstream.lifecycle.log import apply_until_settled
from jobstream.protocol.errors import Reason
from jobstream.runtime import Runtime

# A verdict's commit and one more after a lost race (the next sweep pass judges the rest).
EXPIRE_ATTEMPTS: Final = 2


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
    """End the job `expired` with its terminal event; None when the job moved on first, or
    no longer earns the verdict."""

    def decide(current: JobRecord) -> transitions.Transition | None:
        # After a lost race the job is judged again as it is now: a heartbeat that landed
        # meanwhile (the commit's condition on what the listing shows, store/listed.py) does not
        # put a deadline off, and a job that came back to life earns no stall verdict.
        if current is not record and verdict(current, now, rt.settings) is not reason:
            return None
        return transitions.expire(current, reason, now=now)

    settled = apply_until_settled(
        rt,
        record,
        decide,
        reread=lambda job_id, _: rt.store.get_job_item(job_id),
        attempts=EXPIRE_ATTEMPTS,
    )
    if not settled.moved:
        return None
    observability.count("verdicts", dimension=reason.value)
    return settled.record
