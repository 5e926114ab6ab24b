"""Jobs that run: claim, lease and heartbeats, progress, completion, cancel, verdicts (§4)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from jobstream.jobtypes.base import Outcome
from jobstream.jobtypes.context import ExecutionContext
from jobstream.protocol.errors import Reason
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import admission, execution, jobs
from jobstream.service import events as stream
from jobstream.service.liveness import verdict
from jobstream.service.sweep import sweep
from jobstream.store import keys
from tests.integration.test_concurrency import race
from tests.support.dispatch import dispatch_stream
from tests.support.harness import Clock, canonical_task
from tests.support.state import mark_running
from tests.support.validation import validate


def submit(rt: Runtime, key: str = "run-key", **overrides: Any) -> str:
    task = canonical_task(idempotency_key=key, callback_url=None, **overrides)
    task["params"] = {"query": {"tags": ["botefuku"]}}
    status, body = admission.submit(rt, "acme", task, None)
    assert status == 202
    job_id: str = body["job"]["job_id"]
    return job_id


def types(rt: Runtime, job_id: str) -> list[str]:
    page = stream.events_page(rt, "acme", job_id, {}, None)
    for event in page["events"]:
        validate(event, "Event")
    return [event["type"] for event in page["events"]]


@pytest.fixture
def fast(rt: Runtime) -> Runtime:
    """Heartbeats every 20 ms so lease behaviour shows within a test."""
    return replace(rt, settings=rt.settings.model_copy(update={"heartbeat_interval_ms": 20}))


def test_a_job_runs_to_succeeded(rt: Runtime) -> None:
    job_id = submit(rt)
    assert execution.execute(rt, job_id) == "succeeded"
    job = jobs.get_job(rt, "acme", job_id, None)
    validate(job, "Job")
    assert job["status"] == "succeeded"
    assert job["attempt"] == 1
    assert job["lease_active"] is False
    validate(job["result"], "Result_CandidateSearch")
    assert job["result"]["candidates"]
    sequence = types(rt, job_id)
    assert sequence[:2] == ["job.accepted", "job.started"]
    assert sequence[-1] == "job.succeeded"
    assert set(sequence[2:-1]) <= {"job.progress"}


def test_a_second_claim_is_a_no_op(rt: Runtime) -> None:
    job_id = submit(rt)
    outcomes = race(lambda: execution.execute(rt, job_id))
    assert sorted(outcomes).count("not-claimed") == len(outcomes) - 1
    assert types(rt, job_id).count("job.started") == 1
    assert types(rt, job_id).count("job.succeeded") == 1


def test_no_candidate_fails_the_job(rt: Runtime) -> None:
    job_id = submit(rt, key="nothing")
    record = rt.store.get_job(job_id)
    assert record is not None
    # Params no catalog work matches.
    from tests.support.state import set_job_attributes

    set_job_attributes(rt, job_id, params_canonical='{"query":{"tags":["no-such-tag-anywhere"]}}')
    assert execution.execute(rt, job_id) == "failed"
    job = jobs.get_job(rt, "acme", job_id, None)
    assert job["error"]["code"] == "no_candidate"
    assert types(rt, job_id)[-1] == "job.failed"


def test_cancel_while_queued_means_it_never_runs(rt: Runtime) -> None:
    job_id = submit(rt)
    jobs.cancel(rt, "acme", job_id, None)
    assert execution.execute(rt, job_id) == "not-claimed"
    assert types(rt, job_id) == ["job.accepted", "job.cancelled"]


def _slow_job(started: threading.Event, checkpoints: list[int]) -> Any:
    def run_job(targets: Any, record: Any, context: ExecutionContext) -> Outcome:
        started.set()
        for index in range(400):
            context.checkpoint()
            checkpoints.append(index)
            time.sleep(0.005)
        return Outcome(result={"candidates": [], "scanned": 0})

    return run_job


def test_cancel_while_running_stops_the_worker(
    fast: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    checkpoints: list[int] = []
    monkeypatch.setattr(execution, "run_job", _slow_job(started, checkpoints))
    job_id = submit(fast)
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(execution.execute(fast, job_id)))
    worker.start()
    assert started.wait(5)
    jobs.cancel(fast, "acme", job_id, None)
    worker.join(10)
    assert outcome == ["interrupted"]
    assert len(checkpoints) < 400  # stopped early, at a checkpoint
    assert types(fast, job_id) == ["job.accepted", "job.started", "job.cancelled"]


def test_a_worker_that_lost_its_lease_cannot_complete(rt: Runtime, clock: Clock) -> None:
    job_id = submit(rt, deadline_ms=None)
    # The target's ceiling equals the stall budget (15 minutes): lift it so the stall fires.
    from tests.support.state import set_job_attributes

    set_job_attributes(rt, job_id, deadline_at=clock.now + 10 * 3_600_000)
    record = execution.claim(rt, job_id, "worker-a")
    assert record is not None
    # The worker goes silent: its lease lapses and the stall verdict expires the job.
    clock.advance(rt.settings.stall_timeout_ms + 1)
    report = sweep(rt)
    assert report.expired == {Reason.STALLED_NO_HEARTBEAT: 1}
    result = execution.complete(
        rt, record, "worker-a", Outcome(result={"candidates": [], "scanned": 0})
    )
    assert result == "lost"
    assert types(rt, job_id) == ["job.accepted", "job.started", "job.expired"]
    job = jobs.get_job(rt, "acme", job_id, None)
    assert job["error"]["code"] == "stalled_no_progress"


def test_heartbeats_renew_the_lease(
    fast: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    monkeypatch.setattr(execution, "run_job", _slow_job(started, []))
    job_id = submit(fast)
    worker = threading.Thread(target=lambda: execution.execute(fast, job_id))
    worker.start()
    assert started.wait(5)
    first = fast.store.get_job(job_id)
    assert first is not None
    clock.advance(1_000)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        current = fast.store.get_job(job_id)
        if current is not None and current.heartbeat_at != first.heartbeat_at:
            break
        time.sleep(0.01)
    assert current is not None
    assert current.heartbeat_at == clock.now
    assert current.lease_expires_at == clock.now + fast.settings.lease_ms
    worker.join(10)


def test_progress_is_rate_limited(rt: Runtime, clock: Clock) -> None:
    job_id = submit(rt)
    record = execution.claim(rt, job_id, "worker-p")
    assert record is not None
    lease = execution.Lease(rt, record, "worker-p")
    for index in range(400):
        lease.progress("searching", f"scanned {index}")
        clock.advance(1_000)
    progress = [t for t in types(rt, job_id) if t == "job.progress"]
    # One per 5 s over 400 s would be 80; the per-job cap is 50.
    assert len(progress) == execution.MAX_PROGRESS_EVENTS
    job = jobs.get_job(rt, "acme", job_id, None)
    assert job["progress"]["stage"] == "searching"
    assert job["progress"]["message"].startswith("scanned ")


def test_progress_waits_five_seconds_between_events(rt: Runtime, clock: Clock) -> None:
    job_id = submit(rt)
    record = execution.claim(rt, job_id, "worker-q")
    assert record is not None
    lease = execution.Lease(rt, record, "worker-q")
    for _ in range(12):
        lease.progress("searching")
        clock.advance(1_000)
    # At 5 s and 10 s: none within 5 s of `job.started` (at 0 s), nor of the one before.
    assert types(rt, job_id).count("job.progress") == 2


@pytest.mark.parametrize(
    ("status", "advance", "expected"),
    [
        ("queued", 1_800_000, "queued_too_long"),
        ("running", 900_000, "stalled_no_heartbeat"),
    ],
)
def test_liveness_verdicts(
    rt: Runtime, clock: Clock, status: str, advance: int, expected: str
) -> None:
    job_id = submit(rt, deadline_ms=None)
    # The reference target's ceiling is 15 minutes; lift it so only the budget under test fires.
    from tests.support.state import set_job_attributes

    set_job_attributes(rt, job_id, deadline_at=clock.now + 10 * 3_600_000)
    if status == "running":
        mark_running(rt, job_id, at=clock.now, lease_until=clock.now + 180_000)
    clock.advance(advance - 1)
    assert sweep(rt).jobs_checked == 1
    assert jobs.get_job(rt, "acme", job_id, None)["status"] == status
    clock.advance(1)
    report = sweep(rt)
    assert report.expired == {Reason(expected): 1}
    job = jobs.get_job(rt, "acme", job_id, None)
    assert job["status"] == "expired"
    assert job["error"]["detail"] == {"internal_code": expected}
    assert types(rt, job_id)[-1] == "job.expired"


def test_deadline_verdict(rt: Runtime, clock: Clock) -> None:
    job_id = submit(rt, deadline_ms=60_000)
    clock.advance(60_000)
    assert sweep(rt).expired == {Reason.EXECUTION_TIMEOUT: 1}
    job = jobs.get_job(rt, "acme", job_id, None)
    assert (job["status"], job["error"]["code"]) == ("expired", "deadline_exceeded")


def test_a_live_lease_is_not_stalled(rt: Runtime, clock: Clock) -> None:
    job_id = submit(rt)
    record = rt.store.get_job(job_id)
    assert record is not None
    running = replace(
        record,
        status="running",
        heartbeat_at=clock.now - 2_000_000,
        lease_owner="w",
        lease_expires_at=clock.now + 1_000,
    )
    assert verdict(running, clock.now, rt.settings) is None


def test_lost_dispatch_is_resent_by_the_sweep(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[list[JobDispatch]] = []

    class Recorder:
        def send(self, jobs: list[JobDispatch]) -> int:
            sent.append(list(jobs))
            return len(jobs)

    recording = replace(rt, work=Recorder())  # type: ignore[arg-type]
    job_id = submit(recording)
    assert sent == []  # admission sends nothing itself
    dispatch_stream(recording)
    dispatched = JobDispatch(job_id, "acme")  # in its tenant's message group
    assert sent == [[dispatched]]  # the dispatcher's, from the table's stream
    assert sweep(recording).jobs_redispatched == 0
    clock.advance(keys.HANDOFF_GRACE_MS)
    assert sweep(recording).jobs_redispatched == 1
    assert sent == [[dispatched], [dispatched]]  # the dispatcher's send, then the sweep's
    assert sweep(recording).jobs_redispatched == 0  # not again until another grace period
    # The sweep's mark (dispatched_at) does not wake the dispatcher: no third send.
    dispatch_stream(recording)
    assert len(sent) == 2


def test_a_worker_past_the_deadline_expires_the_job(
    fast: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    checkpoints: list[int] = []
    monkeypatch.setattr(execution, "run_job", _slow_job(started, checkpoints))
    job_id = submit(fast, deadline_ms=60_000)
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(execution.execute(fast, job_id)))
    worker.start()
    assert started.wait(5)
    clock.advance(60_000)
    worker.join(10)
    assert outcome == ["expired"]
    job = jobs.get_job(fast, "acme", job_id, None)
    assert (job["status"], job["error"]["code"]) == ("expired", "deadline_exceeded")
    assert types(fast, job_id)[-1] == "job.expired"


def _result(work_id: str) -> dict[str, Any]:
    candidate = {
        "candidate_id": f"pixiv:{work_id}",
        "platform": "pixiv",
        "work_id": work_id,
        "work_type": "illustration",
        "url": f"https://www.pixiv.net/artworks/{work_id}",
    }
    return {"candidates": [candidate], "scanned": 1, "filtered": []}


def test_a_late_run_never_rewrites_a_reported_result(rt: Runtime) -> None:
    """The job succeeded with its run's result; a late run of it (a copy of its message that
    ran too, a worker that lost its lease) completes from what it read while running: it is
    `lost`, and the result a consumer may have read is never rewritten."""
    job_id = submit(rt)
    record = execution.claim(rt, job_id, "worker-a")
    assert record is not None
    assert execution.complete(rt, record, "worker-a", Outcome(result=_result("1"))) == "succeeded"
    assert execution.complete(rt, record, "worker-a", Outcome(result=_result("2"))) == "lost"
    job = rt.store.get_job(job_id)
    assert job is not None
    assert job.result == _result("1")


def test_a_run_taken_over_keeps_the_result_stored_first(rt: Runtime, clock: Clock) -> None:
    """A worker stored its result and went silent before its completion; the job's message
    comes back once its lease has lapsed and lands that result, without running the job again:
    one result, one terminal event."""
    job_id = submit(rt)
    record = execution.claim(rt, job_id, "worker-a")
    assert record is not None
    rt.store.put_result(record, _result("1"), expires_at=10**10)
    assert execution.execute(rt, job_id) == "not-claimed"  # a copy while the lease is live
    clock.advance(rt.settings.lease_ms)
    assert execution.execute(rt, job_id) == "succeeded"
    job = rt.store.get_job(job_id)
    assert job is not None
    assert (job.status, job.result, job.attempt) == ("succeeded", _result("1"), 1)
    assert types(rt, job_id) == ["job.accepted", "job.started", "job.succeeded"]


def test_a_lapsed_lease_is_taken_over_and_the_job_runs(rt: Runtime, clock: Clock) -> None:
    """A worker claimed the job and died: its message comes back once its lease has lapsed
    (well before the stall verdict) and resumes the job's execution under a lease of its own
    (one start, one attempt); the dead worker's owner can no longer complete it."""
    job_id = submit(rt)
    record = execution.claim(rt, job_id, "worker-a")
    assert record is not None
    clock.advance(rt.settings.lease_ms)
    assert execution.execute(rt, job_id, owner="worker-b") == "succeeded"
    job = rt.store.get_job(job_id)
    assert job is not None
    assert job.attempt == 2  # the run that stopped was the first attempt
    assert types(rt, job_id)[:2] == ["job.accepted", "job.started"]
    assert types(rt, job_id).count("job.started") == 1
    late = Outcome(reason=Reason.NO_CANDIDATE, message="late")
    assert execution.complete(rt, record, "worker-a", late) == "lost"


def test_a_worker_that_does_not_hold_the_job_stores_no_result(rt: Runtime) -> None:
    """A worker completing a job another worker holds (as it read it) is `lost` and stores no
    result: the holder's run stores its own, and the job succeeds with it."""
    job_id = submit(rt)
    record = execution.claim(rt, job_id, "worker-a")
    assert record is not None
    assert execution.complete(rt, record, "worker-b", Outcome(result=_result("2"))) == "lost"
    assert rt.store.get_result(record) is None
    assert execution.complete(rt, record, "worker-a", Outcome(result=_result("1"))) == "succeeded"
    job = rt.store.get_job(job_id)
    assert job is not None
    assert job.result == _result("1")


def test_a_take_over_loses_to_a_heartbeat_after_its_read(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job's lease looked lapsed when a message read it, but its worker renewed it since
    (a slow heartbeat): the take-over is refused, the live run keeps the job."""
    job_id = submit(rt)
    assert execution.claim(rt, job_id, "worker-a") is not None
    clock.advance(rt.settings.lease_ms)
    lapsed = rt.store.get_job_item(job_id)
    assert lapsed is not None
    assert rt.store.renew_lease(job_id, "worker-a", now=clock.now, lease_ms=rt.settings.lease_ms)
    monkeypatch.setattr(rt.store, "get_job_item", lambda _job_id: lapsed)
    assert execution.claim(rt, job_id, "worker-b") is None
    monkeypatch.undo()
    held = rt.store.get_job_item(job_id)
    assert held is not None
    assert (held.lease_owner, held.lease_active(clock.now)) == ("worker-a", True)
