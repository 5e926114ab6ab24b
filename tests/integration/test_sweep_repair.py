"""The sweep's repair of open jobs under load: a pass its budget cuts short, a queue that holds
other tenants' messages, a re-run the queue did not take, a callback nobody takes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from jobstream.domain import CallbackRecord, CallbackState, IntentRef, JobRecord
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import execution
from jobstream.service import sweep as sweep_module
from jobstream.service.callback_coverage import (
    RESEND_FIRST_WAIT_MS,
    RESEND_MAX_WAIT_MS,
    resend_wait_ms,
)
from jobstream.service.handoff import dispatch, hand_off
from jobstream.service.sweep import redispatch_bound_ms, sweep
from jobstream.store import keys
from tests.integration.test_sharding import submit, submit_watched
from tests.support.harness import Clock

MINUTE_MS = 60_000


class Queue:
    """A queue as the sweep sees it: what it took, how many messages it holds, and a refusal
    (`raises`: the send raised; `failed`: SQS answered with every entry listed as Failed)."""

    url = "https://queue.example.test/work"

    def __init__(self, held: int = 0) -> None:
        self.sent: list[Any] = []
        self.held = held
        self.refusal: str | None = None

    def send(self, items: Sequence[Any], *_: Any) -> int:
        if self.refusal == "raises":
            raise ConnectionError("SendMessageBatch timed out")
        if self.refusal == "failed":
            return 0
        self.sent.extend(items)
        return len(items)

    def depth(self) -> int:
        return self.held


@pytest.fixture
def queue() -> Queue:
    return Queue()


@pytest.fixture
def wrt(rt: Runtime, queue: Queue) -> Runtime:
    return replace(rt, work=queue)  # type: ignore[arg-type]


def admitted_one_after_another(rt: Runtime, clock: Clock, prefix: str, count: int) -> list[str]:
    """`count` jobs, in the order the sweep visits them (each a millisecond after the last)."""
    job_ids = []
    for n in range(count):
        job_ids.append(submit(rt, f"{prefix}-{n}"))
        clock.advance(1)
    return job_ids


def sent_ids(queue: Queue) -> list[str]:
    return [item.job_id for item in queue.sent]


# -- a pass its budget cuts short -----------------------------------------------------------------


def test_a_pass_cut_short_sends_what_it_found_and_the_next_resumes_after_it(
    wrt: Runtime, queue: Queue, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More open jobs than one sweep visits, every dispatch lost: each sweep re-sends the lost
    ones it visited, budget spent or not, and the next goes on after them, so that every job is
    visited (and sent) within a bounded number of sweeps, not only the oldest few."""
    job_ids = admitted_one_after_another(wrt, clock, "flood", 12)  # no dispatcher: all lost
    clock.advance(keys.HANDOFF_GRACE_MS)
    elapsed = [0.0]  # a second per job checked: the budget visits a few jobs a sweep
    visits: list[list[str]] = []
    checked = sweep_module._check_job

    def check(runtime: Runtime, record: JobRecord, *rest: Any) -> None:
        visits[-1].append(record.job_id)
        elapsed[0] += 1
        checked(runtime, record, *rest)

    monkeypatch.setattr(sweep_module, "_check_job", check)
    seen: set[str] = set()
    while len(seen) < len(job_ids):
        assert len(visits) < len(job_ids), "a sweep visited no job it had not seen"
        visits.append([])
        report = sweep(wrt, budget_ms=4_500, monotonic=lambda: elapsed[0])
        assert report.budget_exhausted
        assert report.jobs_checked == len(visits[-1]) >= 1
        # What the pass found lost is sent although its budget ran out (a job it went round
        # to again was sent a moment ago: not overdue).
        first_visits = set(visits[-1]) - seen
        assert report.jobs_redispatched == len(first_visits) >= 1
        seen |= first_visits
    visited = [job_id for visit in visits for job_id in visit]
    # Oldest first, every sweep after where the last one stopped: each once before any twice.
    assert visited[: len(job_ids)] == job_ids
    assert sorted(sent_ids(queue)) == sorted(job_ids)
    # A pass that goes round clears the cursor: the next one starts at the oldest again.
    report = sweep(wrt)
    assert not report.budget_exhausted
    assert wrt.store.open_jobs_cursor() is None


def test_a_pass_resumed_goes_round_to_the_jobs_before_its_start(
    wrt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_ids = admitted_one_after_another(wrt, clock, "round", 4)
    wrt.store.move_open_jobs_cursor(wrt.store.get_job_item(job_ids[1]), now=clock())
    visited: list[str] = []
    checked = sweep_module._check_job

    def check(runtime: Runtime, record: JobRecord, *rest: Any) -> None:
        visited.append(record.job_id)
        checked(runtime, record, *rest)

    monkeypatch.setattr(sweep_module, "_check_job", check)
    assert not sweep(wrt).budget_exhausted
    assert visited == [*job_ids[2:], job_ids[0]]  # the cursor's own job: visited last sweep
    assert wrt.store.open_jobs_cursor() is None


# -- other tenants' messages in the queue ----------------------------------------------------------


def test_another_tenants_backlog_does_not_hide_a_lost_dispatch(
    wrt: Runtime, queue: Queue, clock: Clock
) -> None:
    """The queue always holds a few messages (another tenant's steady backlog): its depth never
    drops below the overdue jobs, yet a lost job is sent again once its dispatch is as old as
    the bound, well before it expires."""
    queue.held = 3
    lost = submit(wrt, "lost")  # its dispatch never reached the queue
    record = wrt.store.get_job_item(lost)
    assert record is not None
    assert record.deadline_at is not None
    bound_minutes = -(-redispatch_bound_ms(record, wrt.settings) // MINUTE_MS)
    verdict_minutes = (record.deadline_at - record.created_at) // MINUTE_MS
    assert bound_minutes < verdict_minutes
    sent_at: list[int] = []
    for minute in range(1, verdict_minutes):
        clock.advance(MINUTE_MS)
        report = sweep(wrt)
        sent_at += [minute] * report.jobs_redispatched
    assert sent_at == [bound_minutes]  # once: sent again, it is not overdue for another bound
    assert sent_ids(queue) == [lost]
    assert execution.execute(wrt, lost) in {"succeeded", "failed"}


def test_a_backlog_gets_one_copy_of_each_message_a_bound_at_most(
    wrt: Runtime, queue: Queue, clock: Clock
) -> None:
    """Jobs waiting behind busy workers with their messages in the queue: sent again on their
    age alone at most once a bound, never at every sweep."""
    job_ids = [submit(wrt, f"backlog-{n}") for n in range(5)]
    queue.held = len(job_ids)
    record = wrt.store.get_job_item(job_ids[0])
    assert record is not None
    assert record.deadline_at is not None
    resent = 0
    while clock() + MINUTE_MS < record.deadline_at:
        clock.advance(MINUTE_MS)
        resent += sweep(wrt).jobs_redispatched
    # One copy each while it may wait (the next bound is past its verdict).
    assert resent == len(job_ids)
    assert sorted(sent_ids(queue)) == sorted(job_ids)


# -- a re-run the queue did not take --------------------------------------------------------------


@pytest.mark.parametrize("refusal", ["raises", "failed"])
def test_a_rerun_the_queue_did_not_take_is_sent_by_the_next_sweep(
    wrt: Runtime, queue: Queue, clock: Clock, refusal: str
) -> None:
    job_id = submit(wrt, "rerun")
    assert execution.claim(wrt, job_id, "worker-that-dies") is not None
    clock.advance(wrt.settings.lease_ms + 1)
    queue.refusal = refusal
    report = sweep(wrt)
    assert (report.jobs_rerun, report.errors) == (0, 1)
    queue.refusal = None
    clock.advance(MINUTE_MS)
    assert sweep(wrt).jobs_rerun == 1
    assert queue.sent == [JobDispatch(job_id, "acme")]
    clock.advance(MINUTE_MS)
    assert sweep(wrt).jobs_rerun == 0  # sent for this lapse: once
    assert execution.execute(wrt, job_id) in {"succeeded", "failed"}
    assert wrt.store.get_job_item(job_id).attempt == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("refusal", ["raises", "failed"])
def test_a_lost_job_the_queue_did_not_take_is_overdue_at_the_next_sweep(
    wrt: Runtime, queue: Queue, clock: Clock, refusal: str
) -> None:
    job_id = submit(wrt, "resend-refused")
    clock.advance(keys.HANDOFF_GRACE_MS)
    queue.refusal = refusal
    report = sweep(wrt)
    assert (report.jobs_redispatched, report.errors) == (0, 1)
    queue.refusal = None
    clock.advance(MINUTE_MS)
    assert sweep(wrt).jobs_redispatched == 1
    assert sent_ids(queue) == [job_id]


@pytest.mark.parametrize("refusal", ["raises", "failed"])
def test_a_send_the_queue_did_not_take_is_known_to_its_caller(
    wrt: Runtime, queue: Queue, refusal: str
) -> None:
    job = JobDispatch("job_x", "acme")
    assert dispatch(wrt, [job])
    queue.refusal = refusal
    assert not dispatch(wrt, [job])
    assert not hand_off(replace(wrt, queue=queue), [IntentRef("job_x", 1)])  # type: ignore[arg-type]
    # A queue without a URL takes nothing and is owed nothing.
    assert dispatch(replace(wrt, work=None), [job])


# -- a callback nobody takes ----------------------------------------------------------------------


@pytest.mark.parametrize("watched", [True, False], ids=["its-own-entry", "through-its-job"])
def test_a_callback_nobody_takes_is_sent_again_ever_more_rarely(
    rt: Runtime, clock: Clock, watched: bool
) -> None:
    """A receiver's backlog keeps a re-sent callback waiting: each re-send waits as long as the
    callback had been due, not one sweep; found by its own entry or through its open job."""
    (submit_watched if watched else submit)(rt, "slow-receiver")  # then nobody takes it
    resent_at: list[int] = []
    for minute in range(1, 15):  # a sweep a minute, until the job expires at its deadline
        clock.advance(MINUTE_MS)
        resent_at += [minute] * sweep(rt).callbacks_resent
    assert resent_at == [1, 3, 6, 12]


def test_the_wait_after_a_resend_starts_over_after_an_attempt() -> None:
    intent = CallbackRecord(
        job_id="job_x",
        sequence=1,
        kind="job.accepted",
        state=CallbackState.PENDING,
        attempts=0,
        created_at=0,
        next_attempt_at=0,
    )
    assert resend_wait_ms(intent, MINUTE_MS) == RESEND_FIRST_WAIT_MS
    assert resend_wait_ms(intent, 5 * MINUTE_MS) == 5 * MINUTE_MS  # as long as it was due
    assert resend_wait_ms(intent, 10 * RESEND_MAX_WAIT_MS) == RESEND_MAX_WAIT_MS
    retried = replace(intent, state=CallbackState.RETRY_WAIT, next_attempt_at=4 * MINUTE_MS)
    assert resend_wait_ms(retried, 5 * MINUTE_MS) == RESEND_FIRST_WAIT_MS  # an attempt since
