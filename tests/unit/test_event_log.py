"""The one retry of a move that lost a race (lifecycle/log.py: apply_until_settled), against a
store that loses as often as told: what is written, what is read again, and how it settles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from jobstream.config.settings import Settings, parse_api_tokens
from jobstream.domain import JobRecord, JobStatus
from jobstream.lifecycle import transitions
from jobstream.lifecycle.log import Settled, apply_until_settled, give_up
from jobstream.runtime import Runtime
from jobstream.store.ports import Append, JobStorePort, StaleJobError
from tests.support.records import job_record


@dataclass
class LosingStore:
    """Refuses the first `losses` appends as lost races; records the rest."""

    losses: int = 0
    appended: list[tuple[JobRecord, Append]] = field(default_factory=list)
    refused: int = 0

    def append_event(
        self, record: JobRecord, append: Append, *, clock: Callable[[], int] | None = None
    ) -> None:
        if self.refused < self.losses:
            self.refused += 1
            raise StaleJobError(record.job_id, after_lost_answer=self.refused == 2)
        self.appended.append((record, append))


def runtime(store: LosingStore) -> Runtime:
    settings = Settings(
        table_name="jobs", targets_path=Path("targets.json"), api_tokens=parse_api_tokens("a=t")
    )
    return Runtime(settings=settings, store=cast(JobStorePort, store), clock=lambda: 5_000)


def job(status: JobStatus = JobStatus.RUNNING, **fields: Any) -> JobRecord:
    return job_record(**{"status": status, "event_count": 2, "last_event_at": 1_000, **fields})


def cancel_while_active(record: JobRecord) -> transitions.Transition | None:
    if record.status not in (JobStatus.QUEUED, JobStatus.RUNNING):
        return None
    return transitions.cancel(record, clock=5_000)


def test_a_move_that_wins_is_committed_once_with_its_event() -> None:
    store = LosingStore()
    settled = apply_until_settled(runtime(store), job(), cancel_while_active)
    assert settled.moved
    assert (settled.record.status, settled.record.event_count) == (JobStatus.CANCELLED, 3)
    ((written, append),) = store.appended
    assert written.status is JobStatus.RUNNING  # the condition is checked against the job read
    assert (append.event.kind, append.event.sequence) == ("job.outcome_cancelled", 3)
    assert append.change is not None
    assert append.job_expires_at is not None  # a terminal event starts the job's retention


def test_no_move_due_writes_nothing() -> None:
    store = LosingStore()
    done = job(JobStatus.SUCCEEDED)
    assert apply_until_settled(runtime(store), done, cancel_while_active) == Settled(done, False)
    assert store.appended == []


def test_a_lost_race_is_decided_again_on_the_job_read_again() -> None:
    store = LosingStore(losses=1)
    reads: list[StaleJobError] = []

    def reread(job_id: str, stale: StaleJobError) -> JobRecord:
        reads.append(stale)
        return job(JobStatus.RUNNING, event_count=3, updated_at=2_000, last_event_at=2_000)

    settled = apply_until_settled(
        runtime(store), job(), cancel_while_active, reread=reread, attempts=3
    )
    assert settled.moved
    assert len(reads) == 1
    ((written, append),) = store.appended
    assert written.event_count == 3
    assert append.event.sequence == 4


def test_a_job_that_ended_meanwhile_settles_without_a_move() -> None:
    store = LosingStore(losses=1)
    ended = job(JobStatus.SUCCEEDED, event_count=3)
    settled = apply_until_settled(
        runtime(store), job(), cancel_while_active, reread=lambda *_: ended, attempts=3
    )
    assert (settled.record, settled.moved) == (ended, False)
    assert settled.stale is not None
    assert settled.tried is not None
    assert settled.tried.kind.value == "job.outcome_cancelled"
    assert store.appended == []


def test_the_attempts_bound_the_retries_and_the_last_read_is_kept() -> None:
    store = LosingStore(losses=10)
    reads = iter(range(1, 10))

    def reread(job_id: str, stale: StaleJobError) -> JobRecord:
        return job(event_count=2 + next(reads))

    settled = apply_until_settled(
        runtime(store), job(), cancel_while_active, reread=reread, attempts=3
    )
    assert (store.refused, settled.moved, settled.record.event_count) == (3, False, 5)
    # The last lost race is reported, with the transition that lost it.
    assert settled.stale is not None
    assert settled.stale.after_lost_answer is False
    assert settled.tried is not None
    assert settled.tried.at == 5_000


def test_giving_up_reads_nothing_and_keeps_the_job_as_read() -> None:
    store = LosingStore(losses=1)
    record = job()
    settled = apply_until_settled(runtime(store), record, cancel_while_active, reread=give_up)
    assert (settled.record, settled.moved, store.refused) == (record, False, 1)
