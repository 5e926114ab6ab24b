"""What the services need of the store, as types: the jobs with their events, ack cursors and
results (`JobStorePort`), and the callbacks on those events (`CallbackStorePort`).

The services depend on these protocols, never on the DynamoDB classes that implement them
(store/jobs.py, store/callbacks.py), so a test double or another backend is type-checked against
the same contract.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jobstream.domain import AttemptAnswer, CallbackRecord, IntentRef, JobRecord, StoredEvent
    from jobstream.store.jobs import Append, NewEvent, StateChange
    from jobstream.store.listing import JobListing, JobQuery


class CallbackStorePort(Protocol):
    """The callbacks of a job's events: their delivery state, claims and outcomes."""

    def connect(self) -> None:
        """Create the client now (before threads share it)."""

    def get(self, ref: IntentRef) -> CallbackRecord | None: ...

    def claim(self, ref: IntentRef, *, now: int, lease_ms: int) -> CallbackRecord | None: ...

    def mark_delivered(
        self, intent: CallbackRecord, *, now: int, status: int | None
    ) -> CallbackRecord | None: ...

    def mark_retry(
        self, intent: CallbackRecord, answer: AttemptAnswer, *, next_attempt_at: int
    ) -> CallbackRecord | None: ...

    def mark_dead(
        self, intent: CallbackRecord, answer: AttemptAnswer, *, now: int
    ) -> CallbackRecord | None: ...

    def mark_dead_lettered(self, ref: IntentRef, *, now: int) -> bool: ...

    def postpone(self, ref: IntentRef, *, now: int, due: int) -> bool: ...

    def revive(self, dead: CallbackRecord, *, now: int) -> CallbackRecord | None: ...

    def due(self, *, now: int) -> Iterator[IntentRef]: ...

    def dead(self) -> Iterator[CallbackRecord]: ...


class JobStorePort(Protocol):
    """Jobs, their event streams, ack cursors and results."""

    def connect(self) -> None:
        """Create the client now (before threads share it)."""

    def callbacks(self) -> CallbackStorePort:
        """The callbacks of this store's jobs (the same table)."""

    # -- reads

    def get_job(self, job_id: str) -> JobRecord | None: ...

    def get_job_item(self, job_id: str) -> JobRecord | None: ...

    def get_result(self, record: JobRecord) -> dict[str, Any] | None: ...

    def events_after(
        self, job_id: str, after_sequence: int, limit: int, *, since: int = 0
    ) -> tuple[list[StoredEvent], bool]: ...

    def get_job_and_event_at(
        self, job_id: str, sequence: int | None
    ) -> tuple[JobRecord | None, int | None]: ...

    def iter_jobs(self, query: JobQuery) -> JobListing: ...

    def active_jobs(self) -> Iterator[str]: ...

    # -- writes (each conditional: see the implementation for the condition and why)

    def create_job(self, record: JobRecord, first: NewEvent, *, now_s: int) -> bool: ...

    def append_event(self, record: JobRecord, append: Append) -> None: ...

    def put_result(
        self, record: JobRecord, result: Mapping[str, Any], *, expires_at: int
    ) -> bool: ...

    def renew_lease(self, job_id: str, owner: str, *, now: int, lease_ms: int) -> bool: ...

    def keep_outcome(
        self, job_id: str, owner: str, *, now: int, reason: str | None, message: str | None
    ) -> bool: ...

    def take_over(self, job_id: str, change: StateChange) -> bool: ...

    def mark_dispatched(self, job_id: str, *, now: int) -> bool: ...

    def advance_ack(self, record: JobRecord, sequence: int, *, expires_at: int) -> bool: ...
