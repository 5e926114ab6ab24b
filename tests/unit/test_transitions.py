"""The moves of a job (lifecycle/transitions.py): pure, so read without a store."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobstream.domain import ACTIVE_STATUSES, JobRecord, JobStatus
from jobstream.jobtypes import registry
from jobstream.lifecycle import transitions
from jobstream.lifecycle.transitions import TERMINAL_KIND_BY_STATUS, terminal_status_for
from jobstream.protocol.errors import EXPIRY_REASONS, REASON_MESSAGES, Reason
from jobstream.protocol.events import TERMINAL_KINDS, EventKind
from tests.support.records import job_record

LEASE_MS = 60_000


def job(status: JobStatus = JobStatus.QUEUED, **fields: object) -> JobRecord:
    return job_record(status=status, **fields)


def test_accept_makes_a_queued_job_with_its_requested_event() -> None:
    move = transitions.accept(job(created_at=5_000, updated_at=5_000))
    assert move.kind is EventKind.REQUESTED
    assert move.change.update.fields == {"status": JobStatus.QUEUED, "updated_at": 5_000}
    assert move.at == 5_000
    assert move.change.require_status is None  # the store's creation is its own condition


def test_claim_takes_a_queued_job_under_a_fresh_lease_at_the_first_stage() -> None:
    move = transitions.claim(
        job(attempt=2), "w1", clock=7_000, lease_ms=LEASE_MS, first_stage="searching"
    )
    assert move.kind is EventKind.EXECUTION_STARTED
    assert move.change.update.fields == {
        "status": JobStatus.RUNNING,
        "attempt": 3,
        "started_at": 7_000,
        "heartbeat_at": 7_000,
        "lease_owner": "w1",
        "lease_expires_at": 7_000 + LEASE_MS,
        "progress_stage": "searching",
        "progress_message": None,  # a wait for a slot said so while queued
        "updated_at": 7_000,
    }
    assert move.change.require_status == frozenset({JobStatus.QUEUED})


def test_each_job_type_names_its_first_stage() -> None:
    # What a claimed job showed before types named their stages, for both built-in types.
    assert registry.first_stage("candidate_search") == "searching"
    assert registry.first_stage("asset_fetch") == "searching"
    assert registry.first_stage("no_such_type") == "running"


def test_a_move_never_dates_the_job_before_its_last_change() -> None:
    behind = 500  # a clock behind the job's last change (another host's)
    assert (
        transitions.claim(job(), "w", clock=behind, lease_ms=LEASE_MS, first_stage="s").at == 1_000
    )
    assert transitions.cancel(job(), clock=behind).at == 1_000
    assert transitions.expire(job(), Reason.QUEUED_TOO_LONG, now=behind).at == 1_000
    started = transitions.claim(
        job(started_at=900), "w", clock=behind, lease_ms=LEASE_MS, first_stage="s"
    )
    assert started.change.update.fields["started_at"] == 900  # a second claim keeps the first


def test_take_over_runs_a_lapsed_lease_again_as_the_next_attempt_without_an_event() -> None:
    running = job(JobStatus.RUNNING, lease_owner="old", lease_expires_at=2_000, attempt=1)
    change = transitions.take_over(
        running, "new", clock=3_000, lease_ms=LEASE_MS, first_stage="searching"
    )
    assert change.update.fields == {
        "attempt": 2,
        "heartbeat_at": 3_000,
        "lease_owner": "new",
        "lease_expires_at": 3_000 + LEASE_MS,
        "progress_stage": "searching",
        "progress_message": "attempt 2: the previous run stopped unfinished",
        "updated_at": 3_000,
    }
    assert change.require_status == frozenset({JobStatus.RUNNING})
    assert (change.require_lease_owner, change.require_lease_expired_at) == ("old", 3_001)


def test_progress_is_reported_by_the_lease_holder_only() -> None:
    running = job(JobStatus.RUNNING, lease_owner="w", progress_events=4)
    move = transitions.progress(running, "w", "ranking", "", clock=9_000)
    assert move.kind is EventKind.PROGRESSED
    assert move.change.update.fields == {
        "progress_stage": "ranking",
        "progress_message": None,  # an empty message clears it
        "progress_events": 5,
        "updated_at": 9_000,
    }
    assert move.change.require_status == frozenset({JobStatus.RUNNING})
    assert move.change.require_lease_owner == "w"


def test_retry_counts_the_next_attempt_and_refreshes_the_heartbeat_with_progress() -> None:
    running = job(JobStatus.RUNNING, lease_owner="w", attempt=1, progress_events=2)
    move = transitions.retry(running, "w", stage="retry_wait", message="in 2 s", clock=9_000)
    assert move.kind is EventKind.PROGRESSED
    assert move.change.update.fields == {
        "attempt": 2,
        "heartbeat_at": 9_000,
        "progress_stage": "retry_wait",
        "progress_message": "in 2 s",
        "progress_events": 3,
        "updated_at": 9_000,
    }
    assert move.change.require_status == frozenset({JobStatus.RUNNING})
    assert move.change.require_lease_owner == "w"


def test_finish_without_a_reason_succeeds() -> None:
    running = job(JobStatus.RUNNING, lease_owner="w")
    move = transitions.finish(running, "w", clock=9_000)
    assert move.kind is EventKind.OUTCOME_SUCCEEDED
    assert move.change.update.fields == {
        "status": JobStatus.SUCCEEDED,
        "updated_at": 9_000,
        "lease_owner": None,
        "lease_expires_at": None,
        "pending_reason": None,
        "pending_message": None,
    }
    assert move.change.require_status == frozenset({JobStatus.RUNNING})
    assert move.change.require_lease_owner == "w"


@pytest.mark.parametrize("reason", [*Reason, "not_a_reason"])
def test_finish_with_a_reason_ends_in_the_status_the_reason_gives(reason: str) -> None:
    move = transitions.finish(job(JobStatus.RUNNING), "w", clock=1, reason=reason, message="m")
    status = terminal_status_for(reason)
    fields = move.change.update.fields
    assert (fields["status"], fields["reason"], fields["reason_message"]) == (status, reason, "m")
    # Every failure but an expiry records `job.failed`, a reported cancellation included.
    expected = (
        EventKind.OUTCOME_EXPIRED if status is JobStatus.EXPIRED else EventKind.OUTCOME_FAILED
    )
    assert move.kind is expected


def test_the_reason_table() -> None:
    assert terminal_status_for(Reason.CANCELLED_BY_CONSUMER.value) is JobStatus.CANCELLED
    for reason in EXPIRY_REASONS:
        assert terminal_status_for(reason.value) is JobStatus.EXPIRED
    assert terminal_status_for(Reason.INTERNAL_ERROR.value) is JobStatus.FAILED
    assert terminal_status_for(None) is JobStatus.FAILED
    assert terminal_status_for("unknown") is JobStatus.FAILED


def test_every_terminal_status_implies_one_terminal_kind() -> None:
    terminal = {status for status in JobStatus if status not in ACTIVE_STATUSES}
    assert set(TERMINAL_KIND_BY_STATUS) == terminal
    assert set(TERMINAL_KIND_BY_STATUS.values()) == TERMINAL_KINDS


@pytest.mark.parametrize("reason", sorted(EXPIRY_REASONS))
def test_expire_ends_the_job_expired_and_only_a_stall_waits_for_the_lease(reason: Reason) -> None:
    running = job(JobStatus.RUNNING, lease_owner="w", updated_at=2_000)
    move = transitions.expire(running, reason, now=5_000)
    assert move.kind is EventKind.OUTCOME_EXPIRED
    assert move.change.update.fields == {
        "status": JobStatus.EXPIRED,
        "reason": reason.value,
        "reason_message": REASON_MESSAGES[reason],
        "updated_at": 5_000,
        "lease_owner": None,
        "lease_expires_at": None,
    }
    assert move.change.require_status == frozenset({JobStatus.RUNNING})
    stall = reason is Reason.STALLED_NO_HEARTBEAT
    assert move.change.require_lease_expired_at == (5_000 if stall else None)


@pytest.mark.parametrize("status", sorted(ACTIVE_STATUSES))
def test_cancel_ends_any_active_job_cancelled(status: JobStatus) -> None:
    move = transitions.cancel(job(status, lease_owner="w"), clock=4_000)
    assert move.kind is EventKind.OUTCOME_CANCELLED
    assert move.change.update.fields == {
        "status": JobStatus.CANCELLED,
        "reason": Reason.CANCELLED_BY_CONSUMER.value,
        "reason_message": None,
        "updated_at": 4_000,
        "lease_owner": None,
        "lease_expires_at": None,
    }
    assert move.change.require_status == ACTIVE_STATUSES


def test_a_move_is_pure_its_job_untouched() -> None:
    record = job(JobStatus.RUNNING, lease_owner="w")
    before = replace(record)
    transitions.finish(record, "w", clock=3_000, reason=Reason.INTERNAL_ERROR.value)
    transitions.cancel(record, clock=3_000)
    assert record == before
    moved = transitions.cancel(record, clock=3_000).change.update.applied_to(record)
    assert (moved.status, record.status) == (JobStatus.CANCELLED, JobStatus.RUNNING)
