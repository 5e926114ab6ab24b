"""The store's contract: what the services and the lifecycle need of it, and all they see of it.

The protocols (`JobStorePort`: jobs with their events, ack cursors and results;
`CallbackStorePort`: the callbacks on those events), the values they take and give (a state
change, an event to append, a listing query, its opaque cursor), the error a lost race raises,
the store's own limits (`budgets`: what an item may hold; the callback attempts and the
hand-off grace its conditions use), and its reading of the table's stream records (`new_items`,
store/stream_images.py). The services and the lifecycle import this module and no
other of store/ (tests/unit/test_layering.py), never the DynamoDB classes that implement it
(store/jobs.py, store/callbacks.py): a test double or another backend is type-checked against
the same contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from jobstream.domain import JobChange, JobRecord, JobStatus, ShownJob, StoredEvent
from jobstream.errors import JobstreamError
from jobstream.store import budgets, keys
from jobstream.store.client import error_code
from jobstream.store.cursor import StartKey, decode_cursor, encode_cursor
from jobstream.store.keys import TenantCallbacks
from jobstream.store.shards import ReadBudget
from jobstream.store.stream_images import NewCallback, NewItems, NewJob, new_items

if TYPE_CHECKING:
    from jobstream.domain import (
        AttemptAnswer,
        CallbackRecord,
        Endpoint,
        EndpointHealth,
        EndpointState,
        IntentRef,
    )
    from jobstream.store.listing import JobListing

__all__ = [
    "HANDOFF_GRACE_MS",
    "LISTING_BUDGET",
    "MAX_CALLBACK_ATTEMPTS",
    "Append",
    "CallbackIntent",
    "CallbackStorePort",
    "EndpointStorePort",
    "FeedEntry",
    "FeedPage",
    "FeedStorePort",
    "InvalidCursorError",
    "JobQuery",
    "JobStorePort",
    "ListedJob",
    "NewCallback",
    "NewEvent",
    "NewItems",
    "NewJob",
    "QuotaCharge",
    "QuotaContendedError",
    "QuotaExceededError",
    "ShownProgress",
    "StaleJobError",
    "StartKey",
    "StateChange",
    "TenantCallbacks",
    "budgets",
    "decode_cursor",
    "encode_cursor",
    "error_code",
    "new_items",
]

# Attempts a callback is given (a redrive gives it as many again).
MAX_CALLBACK_ATTEMPTS: Final = 8
# How long a hand-off to a queue may take before the sweep sends it again (store/keys.py).
HANDOFF_GRACE_MS: Final = keys.HANDOFF_GRACE_MS
# What one request may read of a listing index, filtered or not (docs/capacity.md, "Reads"):
# 32 queries (a first read of every `tenant_jobs` shard and as many more), 1,024 entries (64 a
# shard: ~66 read units with entries of a few hundred bytes, ~1,000 with every entry at its
# largest; ~0.2 s of DynamoDB reads, far inside Lambda's timeout).
LISTING_BUDGET: Final = ReadBudget(queries=2 * keys.TENANT_SHARDS, items=64 * keys.TENANT_SHARDS)


class StaleJobError(JobstreamError):
    """A conditional write lost: the job changed since it was read. Re-read and decide again.

    `after_lost_answer`: the refusal answered a retry whose earlier try may have been applied,
    so the change found may be this write itself.
    """

    def __init__(self, job_id: str, *, after_lost_answer: bool = False) -> None:
        super().__init__(job_id)
        self.after_lost_answer = after_lost_answer


@dataclass(frozen=True, slots=True)
class QuotaCharge:
    """What an admission takes of its tenant's quotas (None: that quota is unlimited): one open
    job, and one admission of the minute `now_ms` falls in."""

    tenant: str
    now_ms: int
    max_open_jobs: int | None = None
    admissions_per_minute: int | None = None


class QuotaExceededError(JobstreamError):
    """The admission would take the tenant over `quota` (`limit`); nothing was written. Another
    try may be admitted after `retry_after_s`."""

    def __init__(self, tenant: str, quota: str, limit: int, retry_after_s: int) -> None:
        super().__init__(f"tenant {tenant!r} is at its {quota} quota ({limit})")
        self.tenant = tenant
        self.quota = quota
        self.limit = limit
        self.retry_after_s = retry_after_s


class QuotaContendedError(JobstreamError):
    """The tenant's quota counter changed under every try of an admission (nothing written):
    transient, the same request may be admitted later."""


@dataclass(frozen=True, slots=True)
class CallbackIntent:
    """An event's callback, recorded on the event's own item with the event. It
    holds no copy of the event: the body is rebuilt from the job when it is sent, so the item
    stays small whatever the job's labels and result weigh (`store/budgets.py`)."""

    # The origin of the request that recorded the event: the body's `events_url` is built on it.
    base_url: str | None = None
    # In the sweep index from its recording (CALLBACK#HANDOFF): a terminal event's callback, or
    # one recorded once its job had ended. Any other is found through its open job (JOB#ACTIVE)
    # and, once the job ends, through its terminal event's (service/sweep.py).
    watched: bool = False


@dataclass(frozen=True, slots=True)
class StateChange:
    """A job's change to write together with an event, and the conditions guarding the move:
    the states it may leave, the lease holder it requires, or a lease that must have expired."""

    update: JobChange
    require_status: frozenset[JobStatus] | None = None
    require_lease_owner: str | None = None
    require_lease_expired_at: int | None = None


@dataclass(frozen=True, slots=True)
class ShownProgress:
    """A progress report shown on the job without an event (the rate limit kept it from being
    one), written with a heartbeat: its stage and message, clipped as an event's are, and the
    job's `updated_at` it gives (never below the job's last change)."""

    stage: str
    message: str | None
    updated_at: int


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to record: its item's expiry (`expires_at`, epoch seconds) and its callback."""

    event: StoredEvent
    expires_at: int
    intent: CallbackIntent | None = None
    # When the event committed, as the tenant's feed orders it; None keeps it out of the feed
    # (an internal kind).
    feed_at: int | None = None


@dataclass(frozen=True, slots=True)
class Append(NewEvent):
    """An event appended to a job's stream, with what its job's write in the same commit
    takes: a state change, and what the event is (the store knows no event kinds):
    `once_per_job`, its kind may stand once in the job's stream; `job_expires_at`, it is the
    terminal event and gives the job its own expiry."""

    change: StateChange | None = None
    job_expires_at: int | None = None
    once_per_job: bool = False
    # The tenant whose quota counter the event frees an open job of (the terminal event of a
    # job its admission counted), in a transaction with the job's write.
    releases_quota_of: str | None = None


class InvalidCursorError(JobstreamError, ValueError):
    """A listing cursor that this listing did not issue."""


@dataclass(frozen=True, slots=True)
class ListedJob:
    """A job of a listing, and the start key that resumes the listing just after it."""

    record: ShownJob
    resume_key: StartKey


@dataclass(frozen=True, slots=True)
class JobQuery:
    tenant: str
    correlation_id: str | None = None
    status: str | None = None
    limit: int = 100
    start_key: StartKey | None = None
    # What the request may read of the index: at least one read of each of its partitions.
    budget: ReadBudget = LISTING_BUDGET


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """An event of the tenant's feed and its position there (opaque outside the store, and
    ordered: a later entry's position is greater)."""

    position: str
    event: StoredEvent


@dataclass(frozen=True, slots=True)
class FeedPage:
    entries: list[FeedEntry]
    # Entries after the last one may be there already (another read finds them).
    more: bool


class FeedStorePort(Protocol):
    """The tenant's feed (its events in commit order) and its named cursors."""

    def entries_after(
        self, tenant: str, after: str | None, *, horizon: int, limit: int
    ) -> FeedPage: ...

    def named_position(self, tenant: str, consumer: str) -> str | None: ...

    def move_named(self, tenant: str, consumer: str, position: str, *, now: int) -> str: ...


class CallbackStorePort(Protocol):
    """The callbacks of a job's events: their delivery state, claims and outcomes."""

    def connect(self) -> None:
        """Create the client now (before threads share it)."""

    def get(self, ref: IntentRef) -> CallbackRecord | None: ...

    def get_with_job(
        self, ref: IntentRef, *, with_result: bool = True
    ) -> tuple[CallbackRecord | None, JobRecord | None]: ...

    def get_many(self, refs: Sequence[IntentRef]) -> dict[IntentRef, CallbackRecord]: ...

    def claim(self, ref: IntentRef, *, now: int, lease_ms: int) -> CallbackRecord | None: ...

    def mark_delivered(
        self, intent: CallbackRecord, *, now: int, status: int | None
    ) -> CallbackRecord | None: ...

    def mark_retry(
        self,
        intent: CallbackRecord,
        answer: AttemptAnswer,
        *,
        next_attempt_at: int,
        tenant: str | None = None,
    ) -> CallbackRecord | None: ...

    def mark_dead(
        self, intent: CallbackRecord, answer: AttemptAnswer, *, now: int, tenant: str | None
    ) -> CallbackRecord | None: ...

    def mark_dead_lettered(self, ref: IntentRef, *, now: int) -> bool: ...

    def park(
        self, intent: CallbackRecord, answer: AttemptAnswer | None, *, endpoint: Endpoint
    ) -> CallbackRecord | None: ...

    def unpark(self, ref: IntentRef, *, now: int) -> bool: ...

    def parked(self, endpoint: Endpoint, *, limit: int) -> list[IntentRef]: ...

    def postpone(self, ref: IntentRef, *, now: int, due: int) -> bool: ...

    def mark_resent(self, ref: IntentRef, *, now: int) -> bool: ...

    def watch(self, ref: IntentRef, *, due: int, now: int) -> bool: ...

    def revive(
        self, dead: CallbackRecord, *, now: int, by_dispatcher: bool = False
    ) -> CallbackRecord | None: ...

    def due(self, *, now: int) -> Iterator[IntentRef]: ...

    def dead(self) -> Iterator[CallbackRecord]: ...

    def retire_legacy_shards(self, *, now: int) -> bool:
        """Whether the sweep index's legacy shards (every kind's) are retired: now, when none
        holds an entry any more (recorded once), or before; False while one holds an entry."""

    def of_job(
        self, job_id: str, *, since: int, consistent: bool = True
    ) -> list[CallbackRecord]: ...

    def of_tenant(
        self,
        tenant: str,
        listed: TenantCallbacks,
        *,
        start: StartKey | None,
        limit: int,
        dead_since: int | None = None,
    ) -> tuple[list[CallbackRecord], StartKey | None]: ...

    def is_start_key(
        self, tenant: str, listed: TenantCallbacks, start: Mapping[str, Any]
    ) -> bool: ...


class EndpointStorePort(Protocol):
    """Callback endpoints' health, per (tenant, origin): its counters and its transitions."""

    def get(self, endpoint: Endpoint) -> EndpointHealth: ...

    def of_tenant(self, tenant: str) -> list[EndpointHealth]: ...

    def record_failure(self, endpoint: Endpoint, *, now: int, error: str) -> EndpointHealth: ...

    def record_success(self, endpoint: Endpoint) -> bool: ...

    def pause(
        self, endpoint: Endpoint, *, now: int, failures: int, failing_before: int, probe_at: int
    ) -> bool: ...

    def take_probe(self, endpoint: Endpoint, *, now: int, next_probe_at: int) -> bool: ...

    def resume(self, endpoint: Endpoint, *, now: int, was: EndpointState) -> bool: ...

    def disable(self, endpoint: Endpoint, *, now: int, error: str) -> bool: ...

    def settle(self, endpoint: Endpoint, *, settled_before: int) -> bool: ...

    def requeue(self, endpoint: Endpoint, *, due: int) -> bool: ...

    def held(self, *, now: int) -> Iterator[Endpoint]: ...


@dataclass(frozen=True, slots=True)
class ResourceState:
    """A resource as the table holds it (nothing written yet: free, unpaced, not backed off)."""

    name: str
    holders: Mapping[str, int] = field(default_factory=dict)
    next_request_at: int = 0
    retry_not_before: int = 0
    backoff_reason: str | None = None
    # Which reservation set the pace last: each writes a mark of its own (`Turn`).
    pace_mark: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """A source request's reserved turn: its start, and the mark its reservation wrote with
    the pace, by which only that reservation's own pace is ever moved back (a retried write
    whose first try landed meets another mark, not the pace it set)."""

    start: int
    mark: str


@dataclass(frozen=True, slots=True)
class Waiter:
    """A queued job waiting for one of the resource's slots."""

    resource: str
    job_id: str
    tenant: str
    created_at: int

    @property
    def sort_key(self) -> str:
        return keys.waiter_sk(self.created_at, self.job_id)


class ResourceStorePort(Protocol):
    """Shared resources (store/resources.py): slots, the request pace, the back-off, waiters."""

    def state(self, name: str, *, consistent: bool = True) -> ResourceState: ...

    def acquire(self, name: str, job_id: str, *, max_concurrent: int, now: int) -> bool: ...

    def acquire_with_turn(
        self,
        name: str,
        job_id: str,
        *,
        max_concurrent: int,
        interval_ms: int,
        now: int,
        lead_ms: int,
    ) -> tuple[bool, Turn | None]: ...

    def release(self, name: str, job_id: str, *, held_since: int | None = None) -> int | None: ...

    def reserve_request(
        self, name: str, *, interval_ms: int | None, now: int, replacing: Turn | None = None
    ) -> int | None: ...

    def give_back_turn(self, name: str, *, turn: Turn, interval_ms: int) -> bool: ...

    def back_off(self, name: str, *, until: int, reason: str) -> bool: ...

    def add_waiter(self, waiter: Waiter) -> None: ...

    def remove_waiter(self, waiter: Waiter) -> bool: ...

    def waiters(self, name: str, *, limit: int) -> list[Waiter]: ...

    def waiting_jobs(self, name: str) -> list[str]: ...


class JobStorePort(Protocol):
    """Jobs, their event streams, ack cursors and results."""

    def connect(self) -> None:
        """Create the client now (before threads share it)."""

    def callbacks(self) -> CallbackStorePort:
        """The callbacks of this store's jobs (the same table)."""

    def endpoints(self) -> EndpointStorePort:
        """The health of the callback endpoints (the same table)."""

    def feed(self) -> FeedStorePort:
        """The tenants' feeds of this store's events (the same table)."""

    def resources(self) -> ResourceStorePort:
        """Shared resources' slots, pace and back-off, and their waiters (the same table)."""

    def is_feed_position(self, value: str) -> bool:
        """Whether `value` is shaped like a position the feed writes."""

    # -- reads

    def get_job(self, job_id: str) -> JobRecord | None: ...

    def get_job_item(self, job_id: str) -> JobRecord | None: ...

    def get_job_items(self, job_ids: Sequence[str]) -> dict[str, JobRecord]: ...

    def get_result(self, record: JobRecord) -> dict[str, Any] | None: ...

    def get_jobs(self, job_ids: list[str]) -> dict[str, JobRecord]: ...

    def events_after(
        self, job_id: str, after_sequence: int, limit: int, *, since: int = 0
    ) -> tuple[list[StoredEvent], bool]: ...

    def get_job_and_event_at(
        self, job_id: str, sequence: int | None
    ) -> tuple[JobRecord | None, int | None]: ...

    def iter_jobs(self, query: JobQuery) -> JobListing: ...

    def active_jobs(
        self, *, after: str | None = None, before: str | None = None
    ) -> Iterator[str]: ...

    def open_jobs_cursor(self) -> str | None:
        """Where the last sweep's pass over open jobs stopped, its budget spent (a position for
        `active_jobs`); None: the last pass went round, the next starts at the oldest."""

    def move_open_jobs_cursor(self, last: JobRecord | None, *, now: int) -> None:
        """Record `last` as the open job a sweep's pass stopped at (None: it went round)."""

    # -- writes (each conditional: see the implementation for the condition and why)

    def create_job(
        self,
        record: JobRecord,
        first: NewEvent,
        *,
        now_s: int,
        quota: QuotaCharge | None = None,
        clock: Callable[[], int] | None = None,
    ) -> bool: ...

    def append_event(
        self, record: JobRecord, append: Append, *, clock: Callable[[], int] | None = None
    ) -> None: ...

    def unwritten_events(self, records: Sequence[JobRecord]) -> list[JobRecord]:
        """Those of `records` whose described last event is not in the table."""

    def settle_event(self, record: JobRecord, *, clock: Callable[[], int]) -> bool:
        """Write the job's last event from its description (store/pending.py) when it is
        missing; True when this call wrote it."""

    def leave_active(self, job_id: str, *, sequence: int) -> bool:
        """Take an ended job, its terminal event (`sequence`) written, off the sweep's open
        jobs; False when it was not among them."""

    def put_result(
        self, record: JobRecord, result: Mapping[str, Any], *, expires_at: int
    ) -> bool: ...

    def renew_lease(
        self,
        job_id: str,
        owner: str,
        *,
        now: int,
        lease_ms: int,
        progress: ShownProgress | None = None,
    ) -> bool: ...

    def keep_outcome(
        self, job_id: str, owner: str, *, now: int, reason: str | None, message: str | None
    ) -> bool: ...

    def take_over(self, job_id: str, change: StateChange) -> bool: ...

    def mark_dispatched(self, job_id: str, *, now: int) -> bool: ...

    def mark_rerun_dispatched(self, job_id: str, *, lapsed_lease: int, now: int) -> bool: ...

    def note_waiting(self, record: JobRecord, *, stage: str, message: str, now: int) -> bool: ...

    def advance_ack(self, record: JobRecord, sequence: int, *, expires_at: int) -> bool: ...
