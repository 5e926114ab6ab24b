"""Shared resources: at most `max_concurrent` jobs at once across workers, a waiting job stays
queued without a worker and is sent again by a release, a per-minute pace and a back-off on the
whole resource; retries inside a job; a worker that dies frees its slot within one sweep and its
job runs again as the next attempt; the sweep sends again only messages that are really lost."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from jobstream.config.targets import ResourceLimits, Target
from jobstream.domain import JobRecord
from jobstream.jobtypes import JobRun, JobType, Outcome, ParsedParams, Reason, registry
from jobstream.jobtypes.context import JobInterruptedError
from jobstream.protocol.task import parse_target_id
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import admission, execution, jobs, resources
from jobstream.service import events as stream
from jobstream.service.sweep import sweep
from jobstream.store import keys
from tests.support.harness import Clock, canonical_task
from tests.support.validation import validate

RESOURCE = "account-1"
RACERS = 30


class _AnySettings(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass
class Script:
    """What each run of a `scripted` job does: one outcome per run, in order (the last one
    repeats), each after `requests` source requests through the job's gate."""

    outcomes: list[Outcome] = field(default_factory=lambda: [Outcome(result={"ok": True})])
    requests: int = 1
    runs: int = 0
    # Called inside every run, while the job holds its slot (tests look at the table there).
    during: Any = None


class Scripted(JobType):
    """A job type whose runs follow the test's script, on targets naming a resource."""

    name = "scripted"
    stages = ("working",)
    empty_result: ClassVar[dict[str, Any]] = {}
    settings_model = _AnySettings
    builtin_resources: ClassVar[dict[str, ResourceLimits]] = {}
    script = Script()

    def default_resource(self, target: Target) -> str | None:
        del target
        return None

    def parse_params(self, params: Any) -> ParsedParams:
        return ParsedParams(
            params=dict(params or {}), target_id=parse_target_id((params or {}).get("target_id"))
        )

    def run(self, job: JobRun) -> Outcome:
        script = type(self).script
        for _ in range(script.requests):
            job.context.before_source_request()
        if script.during is not None:
            script.during()
        outcome = script.outcomes[min(script.runs, len(script.outcomes) - 1)]
        script.runs += 1
        return outcome

    def result_model(self) -> type[BaseModel]:
        return _AnySettings


@pytest.fixture
def scripted(targets_path: Path) -> Iterator[Script]:
    Scripted.script = Script()
    registry.register(job_type := Scripted())
    write_targets(targets_path, max_concurrent=1)
    yield Scripted.script
    registry.unregister(job_type.name)


def write_targets(
    path: Path, *, max_concurrent: int, per_minute: int | None = None, **more: Any
) -> None:
    limits: dict[str, Any] = {"max_concurrent": max_concurrent}
    if per_minute is not None:
        limits["per_minute"] = per_minute
    target = {"id": "t1", "job_types": ["scripted"], "resource": RESOURCE, **more}
    path.write_text(
        json.dumps({"resources": {RESOURCE: limits}, "targets": [target]}), encoding="utf-8"
    )


class WorkQueue:
    """The work queue as the tests see it: what was sent, and how many messages it holds."""

    def __init__(self) -> None:
        self.sent: list[JobDispatch] = []
        self.held = 0

    def send(self, dispatches: list[JobDispatch]) -> int:
        self.sent.extend(dispatches)
        self.held += len(dispatches)
        return len(dispatches)

    def depth(self) -> int:
        return self.held

    def delay(self, receipt_handle: str, delay_ms: int) -> None:
        del receipt_handle, delay_ms


@pytest.fixture
def queue() -> WorkQueue:
    return WorkQueue()


@pytest.fixture
def srt(rt: Runtime, clock: Clock, queue: WorkQueue) -> Runtime:
    """A runtime whose waits advance the test's clock (nothing sleeps) and whose work queue
    records what is sent."""
    return replace(rt, sleep=lambda seconds: clock.advance(round(seconds * 1000)), work=queue)  # type: ignore[arg-type]


def submit(rt: Runtime, key: str, **overrides: Any) -> str:
    task = canonical_task(idempotency_key=key, callback_url=None, job_type="scripted", **overrides)
    task["params"] = {}
    status, body = admission.submit(rt, "acme", task, None)
    assert status == 202, body
    job_id: str = body["job"]["job_id"]
    return job_id


def record(rt: Runtime, job_id: str) -> JobRecord:
    found = rt.store.get_job_item(job_id)
    assert found is not None
    return found


def resource(rt: Runtime) -> resources.JobResource:
    found = registry.resource_of(rt.targets(), "scripted", "t1")
    assert found is not None
    return resources.JobResource(*found)


def holders(rt: Runtime) -> dict[str, int]:
    return dict(rt.store.resources().state(RESOURCE).holders)


def event_stages(rt: Runtime, job_id: str) -> list[tuple[str, str | None]]:
    page = stream.events_page(rt, "acme", job_id, {}, None)
    found = []
    for event in page["events"]:
        validate(event, "Event")
        found.append((event["type"], (event["payload"].get("progress") or {}).get("stage")))
    return found


# -- slots ------------------------------------------------------------------------------------


def test_a_job_finding_every_slot_held_waits_queued_and_a_release_sends_it(
    srt: Runtime, scripted: Script, queue: WorkQueue
) -> None:
    first, second = submit(srt, "first"), submit(srt, "second")
    assert resources.take_slot(srt, resource(srt), record(srt, first))
    assert execution.execute(srt, second) == "waiting"
    waiting = jobs.get_job(srt, "acme", second, None)
    validate(waiting, "Job")
    assert waiting["status"] == "queued"
    assert waiting["progress"]["stage"] == "slot_wait"
    assert RESOURCE in waiting["progress"]["message"]
    assert srt.store.resources().waiting_jobs(RESOURCE) == [second]
    assert queue.sent == []  # no message comes back for it: it waits for a release

    assert execution.execute(srt, first) == "succeeded"
    assert queue.sent == [JobDispatch(second, "acme")]  # the release sent the waiter
    assert holders(srt).keys() == {second}  # granted its slot before its message went
    assert srt.store.resources().waiting_jobs(RESOURCE) == []

    assert execution.execute(srt, second) == "succeeded"
    assert holders(srt) == {}
    done = jobs.get_job(srt, "acme", second, None)
    assert done["status"] == "succeeded"
    assert done["progress"]["stage"] != "slot_wait"


def test_a_duplicate_message_of_a_running_job_keeps_its_slot(
    srt: Runtime, scripted: Script
) -> None:
    job_id = submit(srt, "dup")
    copies: list[str] = []
    scripted.during = lambda: copies.append(execution.execute(srt, job_id, owner="copy"))
    assert execution.execute(srt, job_id) == "succeeded"
    assert copies == ["not-claimed"]  # the copy found the job held, and left its slot alone
    assert holders(srt) == {}


def test_racing_workers_never_hold_more_slots_than_the_limit(
    srt: Runtime, scripted: Script, targets_path: Path, queue: WorkQueue
) -> None:
    write_targets(targets_path, max_concurrent=2)
    job_ids = [submit(srt, f"race-{n:02d}") for n in range(RACERS)]
    records = [record(srt, job_id) for job_id in job_ids]
    limit = resource(srt)
    barrier = threading.Barrier(RACERS)

    def take(index: int) -> bool:
        barrier.wait()
        return resources.take_slot(srt, limit, records[index])

    with ThreadPoolExecutor(RACERS) as pool:
        taken = list(pool.map(take, range(RACERS)))
    assert sum(taken) == 2
    assert len(holders(srt)) == 2
    waiting = srt.store.resources().waiting_jobs(RESOURCE)
    assert len(waiting) == RACERS - 2
    # Oldest first: each release sends exactly the next waiter, until none is left.
    for holder in list(holders(srt)):
        assert resources.give_back(srt, limit, holder)
    assert [sent.job_id for sent in queue.sent] == waiting[:2]
    assert len(holders(srt)) == 2


def test_a_cancelled_waiter_passes_its_grant_on(
    srt: Runtime, scripted: Script, queue: WorkQueue, clock: Clock
) -> None:
    first = submit(srt, "a")
    second = submit(srt, "b")
    clock.advance(1)  # waiters wait oldest first
    third = submit(srt, "c")
    assert resources.take_slot(srt, resource(srt), record(srt, first))
    assert execution.execute(srt, second) == "waiting"
    assert execution.execute(srt, third) == "waiting"
    jobs.cancel(srt, "acme", second, None)
    assert execution.execute(srt, first) == "succeeded"
    assert [sent.job_id for sent in queue.sent] == [second]
    assert execution.execute(srt, second) == "not-claimed"  # cancelled: its grant passed on
    assert [sent.job_id for sent in queue.sent] == [second, third]
    assert execution.execute(srt, third) == "succeeded"
    assert holders(srt) == {}


# -- pace and back-off --------------------------------------------------------------------------


def test_requests_keep_to_the_pace_across_jobs(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    write_targets(targets_path, max_concurrent=5, per_minute=60)
    store = srt.store.resources()
    starts = [store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) for _ in range(5)]
    assert starts == [clock.now + step * 1_000 for step in range(5)]


def test_a_rate_limit_backs_the_whole_resource_off(
    srt: Runtime, scripted: Script, clock: Clock
) -> None:
    limit = resource(srt)
    until = resources.back_off(
        srt, limit, Outcome(reason=Reason.RATE_LIMITED, message="429", retry_after_ms=5_000)
    )
    assert until == clock.now + 5_000
    # A shorter back-off later never cuts it short.
    resources.back_off(srt, limit, Outcome(reason=Reason.RATE_LIMITED, retry_after_ms=1_000))
    assert srt.store.resources().state(RESOURCE).retry_not_before == until
    # Another job's next request waits for it, checking in while it waits.
    checks: list[int] = []
    resources.wait_turn(srt, limit, lambda: checks.append(clock.now))
    assert clock.now >= until
    assert len(checks) >= 5


# -- retries inside a job -----------------------------------------------------------------------


def test_a_rate_limited_run_waits_and_runs_again_as_the_next_attempt(
    srt: Runtime, scripted: Script, clock: Clock
) -> None:
    scripted.outcomes = [
        Outcome(reason=Reason.RATE_LIMITED, message="HTTP 429", retry_after_ms=2_000),
        Outcome(result={"ok": True}),
    ]
    job_id = submit(srt, "retry")
    started = clock.now
    assert execution.execute(srt, job_id) == "succeeded"
    job = jobs.get_job(srt, "acme", job_id, None)
    assert (job["status"], job["attempt"]) == ("succeeded", 2)
    assert clock.now - started >= 2_000  # it honoured Retry-After
    assert ("job.progress", "retry_wait") in event_stages(srt, job_id)
    kinds = [kind for kind, _ in event_stages(srt, job_id)]
    assert kinds.count("job.started") == 1
    assert kinds[-1] == "job.succeeded"
    assert srt.store.resources().state(RESOURCE).retry_not_before == started + 2_000


def test_retries_stop_at_max_attempts(srt: Runtime, scripted: Script, targets_path: Path) -> None:
    write_targets(targets_path, max_concurrent=1, max_attempts=3)
    scripted.outcomes = [Outcome(reason=Reason.REMOTE_HTTP_ERROR, message="HTTP 503")]
    job_id = submit(srt, "always-503")
    assert execution.execute(srt, job_id) == "failed"
    job = jobs.get_job(srt, "acme", job_id, None)
    assert (job["attempt"], job["error"]["code"]) == (3, "source_error")
    assert scripted.runs == 3
    assert holders(srt) == {}


def test_a_failure_no_retry_cures_ends_the_job_at_once(srt: Runtime, scripted: Script) -> None:
    scripted.outcomes = [
        Outcome(reason=Reason.REMOTE_HTTP_ERROR, message="HTTP 404", transient=False)
    ]
    job_id = submit(srt, "not-found")
    assert execution.execute(srt, job_id) == "failed"
    assert scripted.runs == 1


def test_a_retry_never_waits_past_the_deadline(srt: Runtime, scripted: Script) -> None:
    scripted.outcomes = [Outcome(reason=Reason.RATE_LIMITED, retry_after_ms=60_000)]
    job_id = submit(srt, "deadline", deadline_ms=10_000)
    assert execution.execute(srt, job_id) == "failed"
    assert scripted.runs == 1
    assert jobs.get_job(srt, "acme", job_id, None)["error"]["code"] == "quota_exceeded"


def test_a_job_cancelled_while_it_waits_to_retry_stops(
    srt: Runtime, scripted: Script, clock: Clock
) -> None:
    scripted.outcomes = [Outcome(reason=Reason.NETWORK_ERROR, retry_after_ms=30_000)]
    job_id = submit(srt, "cancel-in-wait")
    waits = 0

    def sleep(seconds: float) -> None:
        nonlocal waits
        waits += 1
        clock.advance(round(seconds * 1000))
        if waits == 3:
            jobs.cancel(srt, "acme", job_id, None)

    cancelling = replace(srt, sleep=sleep)
    with Lease_heartbeats_off(cancelling):
        assert execution.execute(cancelling, job_id) == "interrupted"
    assert jobs.get_job(srt, "acme", job_id, None)["status"] == "cancelled"
    assert scripted.runs == 1
    assert holders(srt) == {}


class Lease_heartbeats_off:  # noqa: N801 - reads as what it does in a with statement
    """Checkpoints look at the lease's `lost` flag, set by heartbeats; a fake clock gives no
    heartbeat, so the test's own checkpoint re-reads the job instead."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.original = execution.Lease.checkpoint

    def __enter__(self) -> None:
        rt = self.rt
        original = self.original

        def checkpoint(lease: execution.Lease) -> None:
            fresh = rt.store.get_job_item(lease.record.job_id)
            if fresh is None or fresh.is_terminal:
                raise JobInterruptedError("cancelled")
            original(lease)

        execution.Lease.checkpoint = checkpoint  # type: ignore[method-assign]

    def __exit__(self, *_: object) -> None:
        execution.Lease.checkpoint = self.original  # type: ignore[method-assign]


# -- a worker that dies -------------------------------------------------------------------------


def test_a_worker_killed_mid_job_frees_its_slot_within_one_sweep_and_the_job_runs_again(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    dead, waiter = submit(srt, "dies"), submit(srt, "waits")
    limit = resource(srt)
    assert resources.take_slot(srt, limit, record(srt, dead))
    assert execution.claim(srt, dead, "worker-that-dies") is not None  # then nothing more
    assert execution.execute(srt, waiter) == "waiting"
    clock.advance(srt.settings.lease_ms + 1)
    report = sweep(srt)
    assert (report.slots_reclaimed, report.jobs_rerun) == (1, 1)
    # The slot went to the waiter; the dead worker's job was sent again to run once it frees.
    assert holders(srt).keys() == {waiter}
    assert [sent.job_id for sent in queue.sent] == [waiter, dead]
    assert sweep(srt).jobs_rerun == 0  # once per lapse
    assert execution.execute(srt, dead) == "waiting"
    assert execution.execute(srt, waiter) == "succeeded"
    assert execution.execute(srt, dead) == "succeeded"
    job = jobs.get_job(srt, "acme", dead, None)
    assert (job["status"], job["attempt"]) == ("succeeded", 2)


def test_a_job_whose_runs_keep_dying_ends_expired_when_its_attempts_are_spent(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    write_targets(targets_path, max_concurrent=1, max_attempts=2)
    job_id = submit(srt, "keeps-dying")
    assert execution.claim(srt, job_id, "first") is not None
    clock.advance(srt.settings.lease_ms + 1)
    assert execution.claim(srt, job_id, "second") is not None  # attempt 2
    clock.advance(srt.settings.lease_ms + 1)
    assert execution.execute(srt, job_id) == "not-claimed"
    job = jobs.get_job(srt, "acme", job_id, None)
    assert (job["status"], job["error"]["code"]) == ("expired", "stalled_no_progress")


# -- the sweep's re-dispatch ----------------------------------------------------------------------


def test_the_sweep_sends_again_only_messages_that_are_lost(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue, targets_path: Path
) -> None:
    write_targets(targets_path, max_concurrent=100)
    job_ids = []
    for n in range(6):
        job_ids.append(submit(srt, f"backlog-{n}"))
        clock.advance(1)  # dispatched one after another
    queue.held = len(job_ids)  # their messages wait in the queue behind busy workers
    for _ in range(5):
        clock.advance(keys.HANDOFF_GRACE_MS)
        report = sweep(srt)
        assert (report.jobs_redispatched, report.redispatches_held_back) == (0, 6)
    assert queue.sent == []
    queue.held = 4  # two messages were lost
    clock.advance(keys.HANDOFF_GRACE_MS)
    report = sweep(srt)
    assert (report.jobs_redispatched, report.redispatches_held_back) == (2, 4)
    # Which two the queue cannot say: the two dispatched longest ago go first.
    assert [sent.job_id for sent in queue.sent] == job_ids[:2]
    clock.advance(keys.HANDOFF_GRACE_MS)
    assert sweep(srt).jobs_redispatched == 0  # as many messages as overdue jobs again
    queue.held = 0  # the backlog drained: whatever is still queued lost its message
    clock.advance(keys.HANDOFF_GRACE_MS)
    assert sweep(srt).jobs_redispatched == 6
    assert sorted(sent.job_id for sent in queue.sent[2:]) == sorted(job_ids)


def test_the_sweep_never_sends_a_job_waiting_for_a_slot(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    first, second = submit(srt, "holds"), submit(srt, "waits")
    assert resources.take_slot(srt, resource(srt), record(srt, first))
    assert execution.claim(srt, first, "live") is not None
    assert execution.execute(srt, second) == "waiting"
    queue.held = 1  # the running job's message
    clock.advance(keys.HANDOFF_GRACE_MS)
    lease = execution.Lease(srt, record(srt, first), "live")
    assert lease.beat()
    report = sweep(srt)
    assert (report.jobs_redispatched, report.redispatches_held_back) == (0, 0)
    assert queue.sent == []


# -- the operator's view --------------------------------------------------------------------------


def test_jobstream_resources_shows_slots_waiters_pace_and_back_off(
    srt: Runtime, scripted: Script, targets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobstream import runtime as runtime_module
    from tests.integration.test_cli import run

    write_targets(targets_path, max_concurrent=1, per_minute=30)
    monkeypatch.setattr(runtime_module, "runtime", lambda: srt)
    holder, waiter = submit(srt, "holder"), submit(srt, "waiter")
    assert resources.take_slot(srt, resource(srt), record(srt, holder))
    assert execution.execute(srt, waiter) == "waiting"
    resources.back_off(srt, resource(srt), Outcome(reason=Reason.RATE_LIMITED))
    shown = run("resources", output="json")
    assert shown.exit_code == 0, shown.output
    rows = {row["resource"]: row for row in json.loads(shown.stdout)}
    # The built-in pixiv resource is listed too, one job at a time.
    assert rows["pixiv"]["max_concurrent"] == 1
    row = rows[RESOURCE]
    assert (row["max_concurrent"], row["per_minute"], row["slots_in_use"]) == (1, 30, 1)
    assert (row["holders"], row["waiting"]) == ([holder], 1)
    assert row["backed_off_ms"] == resources.DEFAULT_BACKOFF_MS
    assert row["backoff_reason"] == "rate limited"
    table = run("resources")
    assert table.exit_code == 0, table.output
    assert RESOURCE in table.stdout
    assert f"held by {holder}" in table.stdout
