"""Event kinds: the internal kinds we store, their ONE mapping to protocol types, and event ids."""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Final

from jobstream.domain import CallbackRecord


class EventKind(StrEnum):
    """Internal event kinds (stored). Only the lifecycle kinds are ever projected."""

    REQUESTED = "job.requested"
    EXECUTION_STARTED = "job.execution_started"
    PROGRESSED = "job.progressed"
    OUTCOME_SUCCEEDED = "job.outcome_succeeded"
    OUTCOME_FAILED = "job.outcome_failed"
    OUTCOME_EXPIRED = "job.outcome_expired"
    OUTCOME_CANCELLED = "job.outcome_cancelled"
    # Internal-only kinds: never shown, never ackable, never counted.
    EXECUTION_SUMMARY = "execution.summary"
    DELIVERY_DUPLICATE = "delivery.duplicate"
    MEDIA_FALLBACK = "media.fallback"
    OUTBOX_CLAIMED = "outbox.claimed"
    OUTBOX_DEFERRED = "outbox.deferred"
    OUTBOX_DELIVERED = "outbox.delivered"
    OUTBOX_RETRY_SCHEDULED = "outbox.retry_scheduled"
    OUTBOX_DEAD = "outbox.dead"
    OUTBOX_CANCELLED = "outbox.cancelled"
    OUTBOX_REPLAY_REQUESTED = "outbox.replay_requested"


class EventType(StrEnum):
    ACCEPTED = "job.accepted"
    STARTED = "job.started"
    PROGRESS = "job.progress"
    SUCCEEDED = "job.succeeded"
    FAILED = "job.failed"
    EXPIRED = "job.expired"
    CANCELLED = "job.cancelled"


# THE translation from internal kinds to protocol types; None = internal-only.
KIND_TO_TYPE: Final[dict[EventKind, EventType | None]] = {
    EventKind.REQUESTED: EventType.ACCEPTED,
    EventKind.EXECUTION_STARTED: EventType.STARTED,
    EventKind.PROGRESSED: EventType.PROGRESS,
    EventKind.OUTCOME_SUCCEEDED: EventType.SUCCEEDED,
    EventKind.OUTCOME_FAILED: EventType.FAILED,
    EventKind.OUTCOME_EXPIRED: EventType.EXPIRED,
    EventKind.OUTCOME_CANCELLED: EventType.CANCELLED,
    EventKind.EXECUTION_SUMMARY: None,
    EventKind.DELIVERY_DUPLICATE: None,
    EventKind.MEDIA_FALLBACK: None,
    EventKind.OUTBOX_CLAIMED: None,
    EventKind.OUTBOX_DEFERRED: None,
    EventKind.OUTBOX_DELIVERED: None,
    EventKind.OUTBOX_RETRY_SCHEDULED: None,
    EventKind.OUTBOX_DEAD: None,
    EventKind.OUTBOX_CANCELLED: None,
    EventKind.OUTBOX_REPLAY_REQUESTED: None,
}

TERMINAL_KINDS: Final = frozenset(
    {
        EventKind.OUTCOME_SUCCEEDED,
        EventKind.OUTCOME_FAILED,
        EventKind.OUTCOME_EXPIRED,
        EventKind.OUTCOME_CANCELLED,
    }
)

# Each of these is recorded at most once per job; progress may repeat.
ONCE_PER_JOB_KINDS: Final = frozenset(
    {EventKind.REQUESTED, EventKind.EXECUTION_STARTED} | TERMINAL_KINDS
)


def protocol_type(kind: str) -> EventType | None:
    """The protocol type of a stored kind; None for internal-only and unknown kinds (dropped)."""
    try:
        return KIND_TO_TYPE[EventKind(kind)]
    except ValueError:
        return None


# `evt-<at>-<sequence><job number>`: the second number is the event's position in its job's
# stream followed by the job's number, always JOB_NUMBER_DIGITS digits. ASCII digits only: \d
# would also accept other scripts' digits, which int() then reads.
JOB_NUMBER_DIGITS: Final = 39
_EVENT_ID = re.compile(rf"^evt-([0-9]{{1,20}})-([1-9][0-9]{{0,11}})([0-9]{{{JOB_NUMBER_DIGITS}}})$")


def job_number(job_id: str) -> int:
    """A 128-bit number of the job (from a hash of its id): what makes its event ids its own.
    Two jobs share one with odds of 2**-128, and their ids would then also need the same `at`
    and sequence to collide."""
    return int.from_bytes(hashlib.sha256(job_id.encode("utf-8")).digest()[:16], "big")


def event_id(job_id: str, at: int, sequence: int) -> str:
    """`evt-<at>-<sequence><job number>`, the sequence being the event's position in its job's
    stream (from 1). Unique across jobs, stable, and of the reference's shape `evt-<n>-<n>`."""
    return f"evt-{at}-{sequence}{job_number(job_id):0{JOB_NUMBER_DIGITS}d}"


def parse_event_position(value: str, job_id: str) -> tuple[int, int] | None:
    """The (at, sequence) an event id names in the job `job_id`, or None when it is not an id
    we issue for that job: malformed, another job's, or not canonical (`evt-0<at>-...` names no
    event, though its numbers are an event's)."""
    match = _EVENT_ID.fullmatch(value)
    if match is None:
        return None
    at, sequence = int(match.group(1)), int(match.group(2))
    return (at, sequence) if event_id(job_id, at, sequence) == value else None


def callback_event_id(callback: CallbackRecord) -> str:
    """The id of the event a callback carries."""
    return event_id(callback.job_id, callback.created_at, callback.sequence)


def callback_idempotency_key(callback: CallbackRecord) -> str:
    """The callback's `webhook-id` and `X-Idempotency-Key`: one per event, the same on every
    attempt, so a receiver can tell a retry from a new event."""
    return f"job-event:{callback.job_id}:{callback_event_id(callback)}"
