"""The durable state of a job as the store holds it. Plain data: no I/O, no protocol words."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "cancelled", "expired"})
ACTIVE_STATUSES: Final = frozenset({"queued", "running"})


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    tenant: str
    job_type: str
    idempotency_key: str
    params: dict[str, Any]
    params_canonical: str
    target_id: str
    work_type: str
    status: str
    created_at: int
    updated_at: int
    deadline_at: int | None = None
    correlation_id: str | None = None
    labels: dict[str, str] | None = None
    callback_url: str | None = None
    reason: str | None = None
    reason_message: str | None = None
    started_at: int | None = None
    heartbeat_at: int | None = None
    lease_owner: str | None = None
    lease_expires_at: int | None = None
    attempt: int = 0
    progress_stage: str | None = None
    progress_message: str | None = None
    progress_events: int = 0
    dispatched_at: int | None = None
    result: dict[str, Any] | None = None
    # A finished run's outcome (JSON) kept while its completion could not be written.
    pending_outcome: str | None = None
    # The event stream's bookkeeping, kept on the job so counts never read the events.
    event_count: int = 0
    last_event_at: int = 0
    recorded_kinds: frozenset[str] = field(default_factory=frozenset)
    ack_sequence: int = 0
    # Epoch SECONDS (DynamoDB TTL): set with the terminal event; absent while the job is open.
    expires_at: int | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def lease_active(self, now: int) -> bool:
        return bool(self.lease_owner) and (self.lease_expires_at or 0) > now


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One recorded event of a job's stream; `sequence` is its 1-based position."""

    job_id: str
    sequence: int
    kind: str
    at: int


@dataclass(frozen=True, slots=True)
class IntentRef:
    """Names one callback intent: the job and the sequence of the event it carries."""

    job_id: str
    sequence: int

    @property
    def item_id(self) -> str:
        """`<job_id>#<sequence>`: its entry in the sweep index, and its name in logs."""
        return f"{self.job_id}#{self.sequence}"


CALLBACK_PENDING: Final = "pending"
CALLBACK_IN_FLIGHT: Final = "in_flight"
CALLBACK_RETRY_WAIT: Final = "retry_wait"
CALLBACK_DELIVERED: Final = "delivered"
CALLBACK_DEAD: Final = "dead"
# States in which a callback still has to be sent.
CALLBACK_OPEN_STATES: Final = frozenset({CALLBACK_PENDING, CALLBACK_IN_FLIGHT, CALLBACK_RETRY_WAIT})
CALLBACK_CLOSED_STATES: Final = frozenset({CALLBACK_DELIVERED, CALLBACK_DEAD})


@dataclass(frozen=True, slots=True)
class CallbackRecord:
    """A callback intent: one event to POST to the job's callback URL, and how that went."""

    job_id: str
    sequence: int
    tenant: str
    event_id: str
    callback_url: str
    idempotency_key: str
    kind: str
    state: str
    attempts: int
    max_attempts: int
    created_at: int  # the event's `at`
    next_attempt_at: int
    base_url: str | None = None
    lease_until: int | None = None
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: int | None = None
    dead_at: int | None = None
    # Retention (epoch seconds): the expiry of the intent's job once the job has finished, and
    # the intent's own TTL, set only while it is closed (an open intent never expires).
    retain_until: int | None = None
    expires_at: int | None = None
