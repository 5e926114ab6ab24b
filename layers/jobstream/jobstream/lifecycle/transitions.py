"""The moves of a job: one pure function per move, each giving the event the move records and
the state change written with it (its conditions included), and the lifecycle's tables (a
job type's first stage is its own: the service claiming a job asks the job-type registry).

Nothing here reads or writes: the event log (lifecycle/log.py) commits a transition, and the
services decide when a move is due. Adding a move is one function here plus its caller
(docs/architecture.md, "Adding a move").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from jobstream.domain import ACTIVE_STATUSES, JobChange, JobRecord, JobStatus
from jobstream.protocol.errors import EXPIRY_REASONS, REASON_MESSAGES, Reason, parse_reason
from jobstream.protocol.events import EventKind
from jobstream.store.ports import StateChange

# The terminal kind each terminal job status implies.
TERMINAL_KIND_BY_STATUS: Final[dict[JobStatus, EventKind]] = {
    JobStatus.SUCCEEDED: EventKind.OUTCOME_SUCCEEDED,
    JobStatus.FAILED: EventKind.OUTCOME_FAILED,
    JobStatus.EXPIRED: EventKind.OUTCOME_EXPIRED,
    JobStatus.CANCELLED: EventKind.OUTCOME_CANCELLED,
}


@dataclass(frozen=True, slots=True)
class Transition:
    """A move: the event it records and the state change written with it, one commit
    (lifecycle/log.py)."""

    kind: EventKind
    change: StateChange

    @property
    def at(self) -> int:
        """When the move happens: the job's `updated_at` once it is made."""
        return int(self.change.update.fields["updated_at"])


def terminal_status_for(reason: str | None) -> JobStatus:
    """The protocol status a job ends in for an internal reason."""
    known = parse_reason(reason)
    if known is Reason.CANCELLED_BY_CONSUMER:
        return JobStatus.CANCELLED
    return JobStatus.EXPIRED if known in EXPIRY_REASONS else JobStatus.FAILED


def _now(record: JobRecord, clock: int) -> int:
    # A move never dates the job before its last change: `updated_at` only grows.
    return max(clock, record.updated_at)


def accept(record: JobRecord) -> Transition:
    """A new job: `queued` at its creation, with `job.requested`. The store creates it under
    its own condition (the key is free), so the change requires no prior state."""
    return Transition(
        EventKind.REQUESTED,
        StateChange(JobChange({"status": JobStatus.QUEUED, "updated_at": record.created_at})),
    )


def claim(
    record: JobRecord, owner: str, *, clock: int, lease_ms: int, first_stage: str
) -> Transition:
    """queued -> running under a fresh lease of `owner`'s, with `job.started`; it shows
    `first_stage` (its type's first) until its executor reports its own."""
    now = _now(record, clock)
    return Transition(
        EventKind.EXECUTION_STARTED,
        StateChange(
            JobChange(
                {
                    "status": JobStatus.RUNNING,
                    "attempt": record.attempt + 1,
                    "started_at": record.started_at or now,
                    "heartbeat_at": now,
                    "lease_owner": owner,
                    "lease_expires_at": now + lease_ms,
                    "progress_stage": first_stage,
                    # A wait for a slot said so while queued; running, the executor speaks.
                    "progress_message": None,
                    "updated_at": now,
                }
            ),
            # A second claim of the same job (a duplicate message) finds it running: a no-op.
            require_status=frozenset({JobStatus.QUEUED}),
        ),
    )


def take_over(
    record: JobRecord, owner: str, *, clock: int, lease_ms: int, first_stage: str
) -> StateChange:
    """A running job whose lease has ended (its worker stopped without finishing it), run again
    under a lease of `owner`'s as its next attempt: no second start event, the attempt counted
    and shown, like a new owner's heartbeat."""
    now = _now(record, clock)
    attempt = record.attempt + 1
    return StateChange(
        JobChange(
            {
                "attempt": attempt,
                "heartbeat_at": now,
                "lease_owner": owner,
                "lease_expires_at": now + lease_ms,
                "progress_stage": first_stage,
                "progress_message": f"attempt {attempt}: the previous run stopped unfinished",
                "updated_at": now,
            }
        ),
        require_status=frozenset({JobStatus.RUNNING}),
        # From the worker whose lease this was, and only once it has ended (released at
        # `clock` or before): a live run is never taken over.
        require_lease_owner=record.lease_owner,
        require_lease_expired_at=clock + 1,
    )


def retry(record: JobRecord, owner: str, *, stage: str, message: str, clock: int) -> Transition:
    """A run that failed for a transient cause, waiting to run again as the next attempt: the
    job stays running, its heartbeat fresh, with `job.progress` saying so."""
    now = _now(record, clock)
    return Transition(
        EventKind.PROGRESSED,
        StateChange(
            JobChange(
                {
                    "attempt": record.attempt + 1,
                    "heartbeat_at": now,
                    "progress_stage": stage,
                    "progress_message": message,
                    "progress_events": record.progress_events + 1,
                    "updated_at": now,
                }
            ),
            # Only the lease holder retries: a job cancelled, expired or taken over is not its.
            require_status=frozenset({JobStatus.RUNNING}),
            require_lease_owner=owner,
        ),
    )


def progress(
    record: JobRecord, owner: str, stage: str, message: str | None, *, clock: int
) -> Transition:
    """A running job's progress, reported by its lease holder, with `job.progress`."""
    return Transition(
        EventKind.PROGRESSED,
        StateChange(
            JobChange(
                {
                    "progress_stage": stage,
                    "progress_message": message or None,
                    "progress_events": record.progress_events + 1,
                    "updated_at": _now(record, clock),
                }
            ),
            # Only the lease holder reports: a job cancelled, expired or taken over is not its.
            require_status=frozenset({JobStatus.RUNNING}),
            require_lease_owner=owner,
        ),
    )


def finish(
    record: JobRecord,
    owner: str,
    *,
    clock: int,
    reason: str | None = None,
    message: str | None = None,
) -> Transition:
    """A run's outcome, recorded by its lease holder: `succeeded` without a `reason` (the
    result has its own item, written before), else the terminal status the reason gives."""
    ending: dict[str, object]
    if reason is None:
        kind, ending = EventKind.OUTCOME_SUCCEEDED, {"status": JobStatus.SUCCEEDED}
    else:
        status = terminal_status_for(reason)
        # Every failure but an expiry records `job.failed`, a reported cancellation included.
        kind = (
            EventKind.OUTCOME_EXPIRED if status is JobStatus.EXPIRED else EventKind.OUTCOME_FAILED
        )
        ending = {"status": status, "reason": reason, "reason_message": message}
    return Transition(
        kind,
        StateChange(
            JobChange(
                {
                    **ending,
                    "updated_at": _now(record, clock),
                    "lease_owner": None,
                    "lease_expires_at": None,
                    "pending_reason": None,
                    "pending_message": None,
                }
            ),
            # Only the lease holder completes: a cancelled or expired job gets no later outcome.
            require_status=frozenset({JobStatus.RUNNING}),
            require_lease_owner=owner,
        ),
    )


def expire(record: JobRecord, reason: Reason, *, now: int) -> Transition:
    """An active job ended `expired` by a liveness verdict, with `job.expired`."""
    return Transition(
        EventKind.OUTCOME_EXPIRED,
        StateChange(
            JobChange(
                {
                    "status": JobStatus.EXPIRED,
                    "reason": reason.value,
                    "reason_message": REASON_MESSAGES[reason],
                    "updated_at": _now(record, now),
                    "lease_owner": None,
                    "lease_expires_at": None,
                }
            ),
            require_status=frozenset({record.status}),
            # A stall verdict never overrules a live lease; the deadline is hard and does.
            require_lease_expired_at=now if reason is Reason.STALLED_NO_HEARTBEAT else None,
        ),
    )


def cancel(record: JobRecord, *, clock: int) -> Transition:
    """A queued or running job cancelled by its consumer, with `job.cancelled`."""
    return Transition(
        EventKind.OUTCOME_CANCELLED,
        StateChange(
            JobChange(
                {
                    "status": JobStatus.CANCELLED,
                    "reason": Reason.CANCELLED_BY_CONSUMER.value,
                    "reason_message": None,
                    "updated_at": _now(record, clock),
                    "lease_owner": None,
                    "lease_expires_at": None,
                }
            ),
            # Any active state may be cancelled; a terminal job is never changed again.
            require_status=ACTIVE_STATUSES,
        ),
    )
