"""The durable state of a job as the store holds it. Plain data: no I/O, no protocol words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final


class JobStatus(StrEnum):
    """A job's state. Stored as its value; equal to that string."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_STATUSES: Final = frozenset(
    {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED}
)
ACTIVE_STATUSES: Final = frozenset({JobStatus.QUEUED, JobStatus.RUNNING})
# The stage a queued job shows while it waits for a slot of a shared resource.
SLOT_WAIT_STAGE: Final = "slot_wait"


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    tenant: str
    job_type: str
    idempotency_key: str
    params: dict[str, Any]
    params_canonical: str
    # The configured target the job runs on ("" for a job type without targets).
    target_id: str
    status: JobStatus
    created_at: int
    updated_at: int
    # The Task's optional parts.
    deadline_at: int | None = None
    correlation_id: str | None = None
    labels: dict[str, str] | None = None
    callback_url: str | None = None
    # The run: handed to the queue, started, then each claim (an attempt) under a lease.
    dispatched_at: int | None = None
    started_at: int | None = None
    heartbeat_at: int | None = None
    attempt: int = 0
    lease_owner: str | None = None
    lease_expires_at: int | None = None
    progress_stage: str | None = None
    progress_message: str | None = None
    progress_events: int = 0
    # The outcome: a succeeded job's result (its own item, `#RESULT`, read with the job where
    # needed); a finished run's failure (a Reason, a message), kept while its completion could
    # not be written (a success keeps its result item); why the job failed, expired or was
    # cancelled (a Reason), with a message.
    result: dict[str, Any] | None = None
    pending_reason: str | None = None
    pending_message: str | None = None
    reason: str | None = None
    reason_message: str | None = None
    # The event stream's bookkeeping, kept on the job so counts never read the events.
    event_count: int = 0
    last_event_at: int = 0
    recorded_kinds: frozenset[str] = field(default_factory=frozenset)
    # The last event as its commit described it on the job item (store/pending.py), until it is
    # known written: a commit writes the job first and its event next, and whoever finds the
    # event missing writes it from this. None once this process wrote it, or where never read.
    pending_event: dict[str, Any] | None = None
    # The consumer's ack cursor: its own item (`#ACK`), read with the job where needed.
    ack_sequence: int = 0
    # Epoch SECONDS (DynamoDB TTL): set with the terminal event; absent while the job is open.
    expires_at: int | None = None
    # Admitted under its tenant's quotas: counted as open on the tenant's quota item until its
    # terminal event (store/quotas.py); absent (False) on every other job.
    quota_counted: bool = False

    def __post_init__(self) -> None:
        # A status read as text (an item, a test's literal) becomes the enum it names, or fails.
        object.__setattr__(self, "status", JobStatus(self.status))

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def lease_active(self, now: int) -> bool:
        return bool(self.lease_owner) and (self.lease_expires_at or 0) > now


@dataclass(frozen=True, slots=True)
class JobView:
    """What a listing shows of a queued or finished job, read from the listing index alone
    (store/listed.py): no lease, and nothing a document does not show."""

    job_id: str
    job_type: str
    idempotency_key: str
    status: JobStatus
    created_at: int
    updated_at: int
    deadline_at: int | None = None
    correlation_id: str | None = None
    labels: dict[str, str] | None = None
    started_at: int | None = None
    heartbeat_at: int | None = None
    attempt: int = 0
    progress_stage: str | None = None
    progress_message: str | None = None
    result: dict[str, Any] | None = None
    reason: str | None = None
    reason_message: str | None = None
    # A job shown from the index is never running: it holds no lease.
    lease_expires_at: None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", JobStatus(self.status))
        if self.status is JobStatus.RUNNING:
            raise ValueError("a running job is shown from its item, not from a listing's view")

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def lease_active(self, now: int) -> bool:  # noqa: ARG002 - JobRecord's signature
        return False


# What a Job document shows of a job: a JobRecord, or a listing's view of one that is not
# running.
ShownJob = JobRecord | JobView


@dataclass(frozen=True, slots=True)
class JobChange:
    """One change of a job's state, said once: the fields it sets, where None clears a field.

    The new record and the store's update are both computed from it, so they cannot drift."""

    fields: Mapping[str, Any]

    def applied_to(self, record: JobRecord) -> JobRecord:
        return replace(record, **self.fields)

    @property
    def assigned(self) -> dict[str, Any]:
        """The attributes the update writes."""
        return {name: value for name, value in self.fields.items() if value is not None}

    @property
    def cleared(self) -> tuple[str, ...]:
        """The attributes the update removes."""
        return tuple(name for name, value in self.fields.items() if value is None)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One recorded event of a job's stream; `sequence` is its 1-based position. A progress
    event keeps the stage and message it reported: the job's own move on with the next one."""

    job_id: str
    sequence: int
    kind: str
    at: int
    progress_stage: str | None = None
    progress_message: str | None = None


@dataclass(frozen=True, slots=True)
class IntentRef:
    """Names one callback intent: the job and the sequence of the event it carries."""

    job_id: str
    sequence: int

    @property
    def item_id(self) -> str:
        """`<job_id>#<sequence>`: its entry in the sweep index, and its name in logs."""
        return f"{self.job_id}#{self.sequence}"


class CallbackState(StrEnum):
    """Where a callback's delivery stands. Stored as its value; equal to that string."""

    PENDING = "pending"
    IN_FLIGHT = "in_flight"
    RETRY_WAIT = "retry_wait"
    DELIVERED = "delivered"
    DEAD = "dead"
    # Held back, its attempt not spent: its endpoint is paused or disabled (service/endpoints.py).
    PARKED = "parked"


# States in which a callback still has to be sent (a parked one only once its endpoint resumes).
OPEN_CALLBACK_STATES: Final = frozenset(
    {CallbackState.PENDING, CallbackState.IN_FLIGHT, CallbackState.RETRY_WAIT}
)


class EndpointState(StrEnum):
    """How a tenant's callback endpoint (one origin) stands. Stored as its value."""

    HEALTHY = "healthy"
    PAUSED = "paused"  # sustained failure: one probe an interval, the rest parked
    DISABLED = "disabled"  # the receiver answered 410 Gone: nothing until re-enabled


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Names one endpoint: a tenant's callbacks to one origin (`scheme://host:port`)."""

    tenant: str
    origin: str


@dataclass(frozen=True, slots=True)
class EndpointHealth:
    """An endpoint's health as the store keeps it; an endpoint never written is healthy."""

    endpoint: Endpoint
    state: EndpointState = EndpointState.HEALTHY
    # The run of failed attempts since the last success, and when it began.
    failures: int = 0
    failing_since: int | None = None
    changed_at: int | None = None
    # While paused: when the next probe may go.
    next_probe_at: int | None = None
    last_error: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", EndpointState(self.state))


@dataclass(frozen=True, slots=True)
class CallbackRecord:
    """The callback of one event: the event to POST to its job's callback URL, and how that
    went. It lives on the event's own item; the job (read at send time) gives the tenant, the
    URL and the body."""

    job_id: str
    sequence: int
    kind: str
    state: CallbackState
    attempts: int
    created_at: int  # the event's `at`
    next_attempt_at: int
    max_attempts: int = 8
    base_url: str | None = None
    lease_until: int | None = None
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: int | None = None
    dead_at: int | None = None
    # When its dead letter went to the DLQ: a dead callback without one gets it from its next
    # message (the send failed after the callback died, and that message came back).
    dead_lettered_at: int | None = None
    # Retention (epoch seconds): the item's TTL, set when the event is written, beyond any
    # retry of its callback; a redrive removes it (an open callback never expires) and keeps it
    # in `retain_until`, which the close that follows sets again.
    expires_at: int | None = None
    retain_until: int | None = None
    # What the event reported, when it is a progress event (its item keeps it).
    progress_stage: str | None = None
    progress_message: str | None = None
    # Its job's tenant, read from its event's place in the tenant's feed: the message group its
    # queue messages join (None for an event written before the feed).
    tenant: str | None = None
    # When the sweep, a redrive or a resume last sent it to the queue itself (absent: only the
    # dispatcher has sent it).
    resent_at: int | None = None
    # Whether it has an entry of its own in the sweep index (`sweep_pk`): a watched one
    # (CallbackIntent.watched), one that failed an attempt, or parked, dead, revived. An open
    # callback without one is found through its job (service/callback_coverage.py).
    indexed: bool = False

    def __post_init__(self) -> None:
        # A state read as text (an item, a test's literal) becomes the enum it names, or fails.
        object.__setattr__(self, "state", CallbackState(self.state))

    @property
    def ref(self) -> IntentRef:
        return IntentRef(self.job_id, self.sequence)

    @property
    def attempts_made(self) -> int:
        """Its attempts, the one under way included: a claimed callback (in flight) counts it
        already; one a first attempt read without a claim (pending) counts it in the attempt's
        outcome."""
        if self.state is CallbackState.IN_FLIGHT:
            return self.attempts
        return self.attempts + 1


@dataclass(frozen=True, slots=True)
class AttemptAnswer:
    """How a failed attempt to deliver a callback ended: the endpoint's HTTP status (None when
    it gave none) and what went wrong."""

    status: int | None
    error: str
