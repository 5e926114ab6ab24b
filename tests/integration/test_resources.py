"""Shared resources: at most `max_concurrent` jobs at once across workers, a waiting job stays
queued without a worker and is sent again by a release, a per-minute pace and a back-off on the
whole resource (also for a job already waiting for its turn); retries inside a job, also after
our own store failed for a moment; a worker that dies frees its slot within one sweep and its
job runs again as the next attempt, and one whose lease lapsed stops and leaves the next run's
slot alone; a grant outlives a slow work queue, and the sweep never takes back one being taken
up; the sweep sends again only messages that are really lost."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from botocore.exceptions import ClientError
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
from jobstream.store.resources import PACE_TRIES, ResourceStore
from tests.support.client_hooks import hooked
from tests.support.faults import Faults, injected
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


@contextmanager
def resource_updates(rt: Runtime) -> Iterator[list[dict[str, Any]]]:
    """The parameters of the UpdateItem calls made inside the block."""
    calls: list[dict[str, Any]] = []

    def record_call(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    with hooked(rt.store.client, "provide-client-params.dynamodb.UpdateItem", record_call, "u"):
        yield calls


@contextmanager
def state_reads() -> Iterator[list[bool]]:
    """Whether each read of a resource's state inside the block was consistent."""
    reads: list[bool] = []
    original = ResourceStore.state

    def counted(self: ResourceStore, name: str, *, consistent: bool = True) -> Any:
        reads.append(consistent)
        return original(self, name, consistent=consistent)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ResourceStore, "state", counted)
        yield reads


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
        return resources.take_slot(srt, limit, records[index]) is not None

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


@pytest.mark.parametrize("per_minute", [60, None], ids=["paced", "unpaced"])
def test_a_back_off_set_while_a_job_waits_for_its_turn_holds_its_request_too(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock, per_minute: int | None
) -> None:
    write_targets(targets_path, max_concurrent=5, per_minute=per_minute)
    limit = resource(srt)
    # Worker X's request goes first: worker Y's turn is a moment away.
    resources.back_off(srt, limit, Outcome(reason=Reason.RATE_LIMITED, retry_after_ms=1_000))
    later: list[int | None] = []

    def checkpoint() -> None:
        if not later:  # while Y waits, X's request is answered 429 with Retry-After: 30
            later.append(
                resources.back_off(
                    srt, limit, Outcome(reason=Reason.RATE_LIMITED, retry_after_ms=30_000)
                )
            )

    resources.wait_turn(srt, limit, checkpoint)  # worker Y
    until = later[0]
    assert until is not None
    assert clock.now >= until  # Y's request waited the back-off out
    if per_minute is not None:
        # ...and took a turn after it: the pace moved on from there.
        assert srt.store.resources().state(RESOURCE).next_request_at == until + 1_000


def test_a_turn_without_a_wait_reads_the_resource_once(
    srt: Runtime, scripted: Script, targets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_targets(targets_path, max_concurrent=5, per_minute=60)
    with state_reads() as reads:
        resources.wait_turn(srt, resource(srt), lambda: None)
    assert reads == [True]  # the reservation's read: no second look without a wait


def test_a_reservation_that_loses_every_race_reserves_nothing(
    srt: Runtime, scripted: Script, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = srt.store.resources()
    assert store.back_off(RESOURCE, until=clock.now + 60_000, reason="rate limited")
    # Every write of the pace loses to another worker's.
    monkeypatch.setattr(ResourceStore, "_update", lambda *_, **__: (None, None))
    assert store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) is None


def test_a_request_without_a_reserved_turn_waits_an_interval_and_reserves_one(
    srt: Runtime,
    scripted: Script,
    targets_path: Path,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never a request without its turn: the wait goes on, checking in (a cancel or the deadline
    still ends it), until a reservation holds."""
    write_targets(targets_path, max_concurrent=5, per_minute=60)
    original = ResourceStore.reserve_request
    answers: list[int | None] = []

    def lost_first(self: ResourceStore, name: str, **arguments: Any) -> int | None:
        answer = None if not answers else original(self, name, **arguments)
        answers.append(answer)
        return answer

    monkeypatch.setattr(ResourceStore, "reserve_request", lost_first)
    checks: list[int] = []
    started = clock.now
    resources.wait_turn(srt, resource(srt), lambda: checks.append(clock.now))
    assert answers == [None, started + 1_000]
    assert clock.now == started + 1_000
    assert len(checks) >= 2
    assert srt.store.resources().state(RESOURCE).next_request_at == started + 2_000


def test_a_reservation_raced_by_more_workers_than_its_tries_still_gets_its_own_turn(
    srt: Runtime, scripted: Script, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between each read of the pace and the write that follows, another worker reserves. With
    compare-and-sets alone this one lost every try and started at an estimate it never
    reserved, on another's turn. Now its read shows a busy pace, and the turn after the last one
    is taken in one write no other reservation makes fail: it gets its own turn, and every
    request, before and after it, keeps an interval from the next."""
    store = srt.store.resources()
    original = ResourceStore.state
    others: list[int | None] = []
    racing = threading.local()

    def raced(self: ResourceStore, name: str, *, consistent: bool = True) -> Any:
        read = original(self, name, consistent=consistent)
        if not getattr(racing, "inside", False) and len(others) < PACE_TRIES + 5:
            racing.inside = True  # another worker's reservation lands after this read
            try:
                others.append(store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now))
            finally:
                racing.inside = False
        return read

    monkeypatch.setattr(ResourceStore, "state", raced)
    mine = store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now)
    monkeypatch.setattr(ResourceStore, "state", original)
    later = [store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) for _ in range(30)]
    starts = [*others, mine, *later]
    assert None not in starts
    assert sorted(starts) == [clock.now + n * 1_000 for n in range(len(starts))]  # type: ignore[type-var]


@pytest.mark.parametrize("busy", [False, True], ids=["compare-and-set", "after the last"])
def test_a_reservation_sent_again_after_its_answer_was_lost_keeps_its_turn(
    srt: Runtime, scripted: Script, clock: Clock, busy: bool
) -> None:
    """Its first try landed, its answer did not, and the client sends it again: the retry meets
    its own mark and the turn it took is the one returned; the pace moved once (moved twice, an
    interval would go to nobody)."""
    store = srt.store.resources()
    if busy:  # a turn taken already: the next is taken after it, in one write
        assert store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) == clock.now
    pace = "next_request_at + :interval" if busy else "next_request_at = :next"
    faults = Faults(kinds=("internal",), mode="after", at=1, matching=pace)
    with injected(faults):
        turn = store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now)
    assert faults.fired == 1
    expected = clock.now + 1_000 if busy else clock.now
    assert turn == expected
    assert store.state(RESOURCE).next_request_at == expected + 1_000
    assert store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) == expected + 1_000


def test_a_back_off_landing_between_the_read_and_the_write_holds_the_turn(
    srt: Runtime, scripted: Script, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle resource: another worker's 429 lands after the reservation read the item and
    before it wrote its turn at now. The write is refused, the item read again: the turn comes
    after the back-off."""
    store = srt.store.resources()
    original = ResourceStore.state
    landed: list[bool] = []

    def raced(self: ResourceStore, name: str, *, consistent: bool = True) -> Any:
        read = original(self, name, consistent=consistent)
        if not landed:
            landed.append(store.back_off(RESOURCE, until=clock.now + 30_000, reason="429"))
        return read

    monkeypatch.setattr(ResourceStore, "state", raced)
    assert store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) == clock.now + 30_000
    assert landed == [True]


@pytest.mark.parametrize("landing", ["back-off", "give-back"])
def test_a_busy_pace_that_changes_before_its_write_is_read_again(
    srt: Runtime,
    scripted: Script,
    targets_path: Path,
    clock: Clock,
    *,
    landing: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The read showed a busy pace; before the turn after it was written, a back-off passed the
    pace, or a turn given back moved it behind now: that write is refused, and the turn is
    taken from the item as it is then."""
    write_targets(targets_path, max_concurrent=2, per_minute=60)
    store = srt.store.resources()
    slot = resources.take_slot(srt, resource(srt), record(srt, submit(srt, "gives-back")))
    assert slot is not None
    assert slot.first_turn is not None
    clock.advance(resources.TURN_LEAD_MS + 500)  # the turn passed, unused
    original = ResourceStore.state
    landed: list[bool] = []

    def raced(self: ResourceStore, name: str, *, consistent: bool = True) -> Any:
        read = original(self, name, consistent=consistent)
        if not landed:
            assert read.next_request_at > clock.now  # a busy pace
            landed.append(
                store.back_off(RESOURCE, until=clock.now + 30_000, reason="429")
                if landing == "back-off"
                else store.give_back_turn(RESOURCE, turn=slot.first_turn, interval_ms=1_000)
            )
        return read

    monkeypatch.setattr(ResourceStore, "state", raced)
    turn = store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now)
    assert landed == [True]
    assert turn == (clock.now + 30_000 if landing == "back-off" else clock.now)
    assert store.state(RESOURCE).next_request_at == turn + 1_000  # type: ignore[operator]


def test_a_back_off_beyond_a_busy_pace_moves_the_turn_after_it(
    srt: Runtime, scripted: Script, clock: Clock
) -> None:
    store = srt.store.resources()
    starts = [store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) for _ in range(3)]
    assert starts == [clock.now, clock.now + 1_000, clock.now + 2_000]
    assert store.back_off(RESOURCE, until=clock.now + 10_000, reason="rate limited")
    assert store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now) == clock.now + 10_000
    assert store.state(RESOURCE).next_request_at == clock.now + 11_000


def resource_writes(calls: list[dict[str, Any]]) -> int:
    return sum(
        call["Key"][keys.PK]["S"] == keys.resource_pk(RESOURCE) for call in calls if "Key" in call
    )


def test_a_paced_jobs_slot_and_its_first_turn_are_one_write(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    """The worker's take of the slot reserves the first request's turn, TURN_LEAD_MS ahead (the
    claim comes between): the request starts then, never before, and the pace moves on one
    interval from it. The job's life writes the resource twice: its slot with its turn, then
    its slot given back."""
    write_targets(targets_path, max_concurrent=2, per_minute=60)
    first, second = submit(srt, "paced"), submit(srt, "paced-next")
    started: list[int] = []
    scripted.during = lambda: started.append(clock.now)
    taken_at = clock.now
    assert execution.execute(srt, first) == "succeeded"  # (the resource's item made first)
    assert started == [taken_at + resources.TURN_LEAD_MS]
    assert srt.store.resources().state(RESOURCE).next_request_at == started[0] + 1_000
    with resource_updates(srt) as updates:
        assert execution.execute(srt, second) == "succeeded"
    assert resource_writes(updates) == 2
    # The next job's first request keeps to the pace: an interval after.
    assert started[1] == started[0] + 1_000


def test_racing_workers_on_a_paced_resource_take_turns_an_interval_apart(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    write_targets(targets_path, max_concurrent=5, per_minute=60)
    records = [record(srt, submit(srt, f"paced-race-{n}")) for n in range(10)]
    limit = resource(srt)
    barrier = threading.Barrier(len(records))

    def take(job: JobRecord) -> resources.Slot | None:
        barrier.wait()
        return resources.take_slot(srt, limit, job)

    with ThreadPoolExecutor(len(records)) as pool:
        slots = [slot for slot in pool.map(take, records) if slot is not None]
    assert len(slots) == 5
    assert len(holders(srt)) == 5
    turns = sorted(slot.first_turn.start for slot in slots if slot.first_turn is not None)
    first = clock.now + resources.TURN_LEAD_MS
    assert turns == [first + n * 1_000 for n in range(5)]


def test_a_request_later_than_its_turn_takes_a_new_one(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    """A claim slower than TURN_LEAD_MS: the turn is gone (the next one may start an interval
    after it), so the request takes the next free turn as any other would."""
    write_targets(targets_path, max_concurrent=2, per_minute=60)
    limit = resource(srt)
    slot = resources.take_slot(srt, limit, record(srt, submit(srt, "slow")))
    assert slot is not None
    assert slot.first_turn is not None
    assert slot.first_turn.start == clock.now + resources.TURN_LEAD_MS
    store = srt.store.resources()
    others = store.reserve_request(RESOURCE, interval_ms=1_000, now=clock.now)  # another job's
    assert others == slot.first_turn.start + 1_000
    clock.advance(resources.TURN_LEAD_MS + 1)
    resources.wait_turn(srt, limit, lambda: None, reserved=slot.first_turn)
    assert clock.now == others + 1_000
    assert store.state(RESOURCE).next_request_at == others + 2_000


def test_a_late_request_takes_back_its_own_turns_interval_when_nobody_took_a_later_one(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    """A claim slower than its lead, nobody's turn after its own: the request goes at once
    (its own turn never went), not an interval after the turn it missed."""
    write_targets(targets_path, max_concurrent=2, per_minute=1)
    limit = resource(srt)
    slot = resources.take_slot(srt, limit, record(srt, submit(srt, "late")))
    assert slot is not None
    assert slot.first_turn is not None
    clock.advance(resources.TURN_LEAD_MS + 50)
    late = clock.now
    resources.wait_turn(srt, limit, lambda: None, reserved=slot.first_turn)
    assert clock.now == late
    assert srt.store.resources().state(RESOURCE).next_request_at == late + 60_000


def test_a_duplicate_message_of_a_running_paced_job_takes_no_turn(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    write_targets(targets_path, max_concurrent=2, per_minute=1)
    job_id = submit(srt, "dup-paced")
    started: list[int] = []
    copies: list[str] = []

    def during() -> None:
        started.append(clock.now)
        with resource_updates(srt) as updates:
            copies.append(execution.execute(srt, job_id, owner="copy"))
        assert resource_writes(updates) == 1  # its own slot taken up again, nothing else

    scripted.during = during
    assert execution.execute(srt, job_id) == "succeeded"
    assert copies == ["not-claimed"]
    # The copy found the job's own slot: the pace is the run's turn and one interval.
    assert srt.store.resources().state(RESOURCE).next_request_at == started[0] + 60_000


@pytest.mark.parametrize("why", ["claim failed", "no request"])
def test_a_turn_no_request_used_is_given_back(
    srt: Runtime,
    *,
    scripted: Script,
    targets_path: Path,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    why: str,
) -> None:
    """The claim failed after the take (a cancel between the two, a race), or the run made
    no source request: the pace moves back to the unused turn (nobody took a later one)."""
    write_targets(targets_path, max_concurrent=2, per_minute=1)
    job_id = submit(srt, "unused")
    turn = clock.now + resources.TURN_LEAD_MS
    if why == "claim failed":
        monkeypatch.setattr(execution, "_claim", lambda *_: None)
        assert execution.execute(srt, job_id) == "not-claimed"
    else:
        scripted.requests = 0
        assert execution.execute(srt, job_id) == "succeeded"
    assert srt.store.resources().state(RESOURCE).next_request_at == turn
    # The next job's request may take that turn: nobody's went at it.
    nxt = resources.take_slot(srt, resource(srt), record(srt, submit(srt, "next")))
    assert nxt is not None
    assert nxt.first_turn is not None
    assert nxt.first_turn.start == turn


def test_a_give_back_retried_after_its_first_try_landed_moves_no_other_turn(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    """The give-back's answer was lost and the client tries it again, after another job took
    the turn given back: the retry meets that job's mark, not the pace it set, and changes
    nothing (moved back twice, the turn would go to two jobs)."""
    write_targets(targets_path, max_concurrent=3, per_minute=10)
    limit = resource(srt)
    store = srt.store.resources()
    first = resources.take_slot(srt, limit, record(srt, submit(srt, "gives-back")))
    assert first is not None
    assert first.first_turn is not None
    assert store.give_back_turn(RESOURCE, turn=first.first_turn, interval_ms=6_000)
    second = resources.take_slot(srt, limit, record(srt, submit(srt, "takes-it")))
    assert second is not None
    assert second.first_turn is not None
    assert second.first_turn.start == first.first_turn.start
    # The retry of the first give-back.
    assert not store.give_back_turn(RESOURCE, turn=first.first_turn, interval_ms=6_000)
    third = resources.take_slot(srt, limit, record(srt, submit(srt, "next")))
    assert third is not None
    assert third.first_turn is not None
    assert third.first_turn.start == first.first_turn.start + 6_000


def test_a_turn_given_back_whatever_fails_lets_the_run_complete(
    srt: Runtime, scripted: Script, targets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_targets(targets_path, max_concurrent=2, per_minute=60)
    scripted.requests = 0  # its turn is given back as the run ends

    def refused(*_: Any, **__: Any) -> bool:
        raise ClientError({"Error": {"Code": "ValidationException"}}, "UpdateItem")

    monkeypatch.setattr(ResourceStore, "give_back_turn", refused)
    job_id = submit(srt, "completes")
    assert execution.execute(srt, job_id) == "succeeded"
    assert holders(srt) == {}


def test_a_back_off_set_after_the_turn_was_taken_holds_the_request(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    """The turn taken with the slot read the back-off then: another worker's 429 since is
    waited out, then a turn after it, even when the request comes just at its turn (its
    claim took the whole lead: no wait that would look again)."""
    write_targets(targets_path, max_concurrent=2, per_minute=60)
    limit = resource(srt)
    slot = resources.take_slot(srt, limit, record(srt, submit(srt, "backed-off")))
    assert slot is not None
    assert slot.first_turn is not None
    clock.advance(resources.TURN_LEAD_MS)
    until = resources.back_off(
        srt, limit, Outcome(reason=Reason.RATE_LIMITED, retry_after_ms=5_000)
    )
    assert until is not None
    with state_reads() as reads:
        resources.wait_turn(srt, limit, lambda: None, reserved=slot.first_turn)
    assert clock.now == until
    assert srt.store.resources().state(RESOURCE).next_request_at == until + 1_000
    # The turn's back-off was read with the slot: looked at again consistently (a 429 just
    # before the turn is not missed), then the new turn's own read.
    assert reads[0] is True


def test_an_unpaced_resources_slot_takes_no_turn(
    srt: Runtime, scripted: Script, targets_path: Path
) -> None:
    write_targets(targets_path, max_concurrent=2)
    slot = resources.take_slot(srt, resource(srt), record(srt, submit(srt, "unpaced")))
    assert slot == resources.Slot(first_turn=None)
    assert srt.store.resources().state(RESOURCE).next_request_at == 0


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


def throttled(operation: str) -> ClientError:
    """DynamoDB's answer to a hot item, as it reaches the store after the client's retries."""
    error = {"Code": "ProvisionedThroughputExceededException", "Message": "hot item"}
    return ClientError({"Error": error}, operation)


def test_a_store_failure_at_a_source_requests_turn_runs_the_job_again(
    srt: Runtime, scripted: Script, targets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_targets(targets_path, max_concurrent=2, per_minute=600)
    scripted.requests = 2  # the first request's turn came with the slot: the second's fails
    job_id = submit(srt, "throttled-turn")
    original = ResourceStore.reserve_request
    failures = [throttled("UpdateItem")]

    def reserve_request(self: ResourceStore, name: str, **turn: Any) -> int:
        if failures:
            raise failures.pop()
        return original(self, name, **turn)

    monkeypatch.setattr(ResourceStore, "reserve_request", reserve_request)
    assert execution.execute(srt, job_id) == "succeeded"
    job = jobs.get_job(srt, "acme", job_id, None)
    assert (job["status"], job["attempt"]) == ("succeeded", 2)
    assert ("job.progress", "retry_wait") in event_stages(srt, job_id)
    assert holders(srt) == {}


def test_a_store_failing_through_every_attempt_ends_the_job_retryable(
    srt: Runtime, scripted: Script, targets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_targets(targets_path, max_concurrent=1, max_attempts=2)

    def state(self: ResourceStore, name: str, *, consistent: bool = True) -> Any:
        raise throttled("GetItem")

    monkeypatch.setattr(ResourceStore, "state", state)
    job_id = submit(srt, "throttled-store")
    assert execution.execute(srt, job_id) == "failed"
    job = jobs.get_job(srt, "acme", job_id, None)
    assert job["attempt"] == 2
    assert (job["error"]["code"], job["error"]["retryable"]) == ("source_error", True)
    assert "ProvisionedThroughputExceededException" in job["error"]["message"]


def test_a_back_off_the_store_cannot_write_still_lets_the_job_run_again(
    srt: Runtime, scripted: Script, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted.outcomes = [
        Outcome(reason=Reason.RATE_LIMITED, message="HTTP 429", retry_after_ms=2_000),
        Outcome(result={"ok": True}),
    ]

    def back_off(self: ResourceStore, name: str, *, until: int, reason: str) -> bool:
        raise throttled("UpdateItem")

    monkeypatch.setattr(ResourceStore, "back_off", back_off)
    job_id = submit(srt, "throttled-back-off")
    started = clock.now
    assert execution.execute(srt, job_id) == "succeeded"
    assert jobs.get_job(srt, "acme", job_id, None)["attempt"] == 2
    assert clock.now - started >= 2_000  # its own retry still honoured Retry-After


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


def test_a_live_worker_whose_lease_lapsed_stops_before_its_next_source_request(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    job_id, waiter = submit(srt, "lapses"), submit(srt, "waits")
    seen: dict[str, Any] = {}
    lease: list[execution.Lease] = []
    original = execution.Lease.checkpoint

    def checkpoint(self: execution.Lease) -> None:
        lease[:] = [self]
        original(self)

    def during() -> None:
        # The worker lives, but its heartbeats failed for a whole lease: the sweep takes its
        # slot back for the waiter and sends the job again.
        assert execution.execute(srt, waiter) == "waiting"
        clock.advance(srt.settings.lease_ms)
        report = sweep(srt)
        seen["sweep"] = (report.slots_reclaimed, report.jobs_rerun)
        seen["beat"] = lease[0].beat()  # a renewal that now succeeds is not tried
        scripted.requests = 2
        job_context = lease[0]
        job_context.before_source_request()  # the run's next source request
        seen["requested"] = True

    scripted.requests = 1
    scripted.during = during
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(execution.Lease, "checkpoint", checkpoint)
        assert execution.execute(srt, job_id, owner="A") == "interrupted"
    assert seen == {"sweep": (1, 1), "beat": False}
    assert holders(srt).keys() == {waiter}  # the waiter's slot, left alone
    job = record(srt, job_id)
    assert (job.status.value, job.lease_owner) == ("running", "A")
    assert (job.lease_expires_at or 0) <= clock.now  # never renewed after it lapsed
    assert [sent.job_id for sent in queue.sent] == [waiter, job_id]


def test_a_run_whose_job_another_worker_took_over_leaves_that_workers_slot(
    srt: Runtime, scripted: Script, targets_path: Path, clock: Clock
) -> None:
    write_targets(targets_path, max_concurrent=2)
    job_id = submit(srt, "taken-over")

    def during() -> None:
        clock.advance(srt.settings.lease_ms)  # A's heartbeats failed meanwhile
        assert sweep(srt).jobs_rerun == 1
        # The job's message again, at worker B: B takes the slot and the job over.
        assert resources.take_slot(srt, resource(srt), record(srt, job_id))
        assert execution.claim(srt, job_id, "B") is not None

    scripted.during = during  # A's executor then returns without another checkpoint
    assert execution.execute(srt, job_id, owner="A") == "lost"
    assert holders(srt).keys() == {job_id}  # B's slot
    job = record(srt, job_id)
    assert (job.status.value, job.lease_owner) == ("running", "B")


# -- grants ---------------------------------------------------------------------------------------


def test_a_grant_outlives_a_slow_work_queue(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    holder = submit(srt, "holder")
    clock.advance(1)
    first = submit(srt, "first")
    clock.advance(1)
    second = submit(srt, "second")
    assert resources.take_slot(srt, resource(srt), record(srt, holder))
    assert execution.execute(srt, first) == "waiting"
    assert execution.execute(srt, second) == "waiting"
    assert execution.execute(srt, holder) == "succeeded"  # grants `first` its slot
    for granted, next_waiter in [(first, second), (second, None)]:
        assert holders(srt).keys() == {granted}
        # A backlog holds the grant's message 150 s: the sweeps meanwhile keep the slot for it
        # and send no copy (the queue still holds as many messages as jobs are overdue).
        for _ in range(3):
            clock.advance(50_000)
            report = sweep(srt)
            assert (report.slots_reclaimed, report.waiters_woken) == (0, 0)
            assert report.jobs_redispatched == 0
        assert holders(srt).keys() == {granted}
        assert execution.execute(srt, granted) == "succeeded"
        sent = [dispatched.job_id for dispatched in queue.sent]
        assert sent[-1] == (next_waiter or granted)
    assert scripted.runs == 3
    assert holders(srt) == {}
    assert [dispatched.job_id for dispatched in queue.sent] == [first, second]


def granted_behind_a_holder(srt: Runtime) -> str:
    """A job that waited for the resource's one slot, granted it as its holder ended."""
    holder, granted = submit(srt, "holder"), submit(srt, "granted")
    assert resources.take_slot(srt, resource(srt), record(srt, holder))
    assert execution.execute(srt, granted) == "waiting"
    assert execution.execute(srt, holder) == "succeeded"
    return granted


def test_a_grant_whose_message_was_lost_is_sent_again_and_keeps_its_slot(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    granted = granted_behind_a_holder(srt)
    assert [sent.job_id for sent in queue.sent] == [granted]
    queue.held = 0  # its message was lost
    clock.advance(keys.HANDOFF_GRACE_MS)
    assert sweep(srt).jobs_redispatched == 0  # a fresh grant: its message is on its way
    clock.advance(resources.GRANT_TIMEOUT_MS - keys.HANDOFF_GRACE_MS)
    report = sweep(srt)
    assert (report.jobs_redispatched, report.slots_reclaimed) == (1, 0)
    assert [sent.job_id for sent in queue.sent] == [granted, granted]
    assert holders(srt).keys() == {granted}
    assert execution.execute(srt, granted) == "succeeded"
    assert holders(srt) == {}


def test_a_grant_whose_job_can_no_longer_start_is_taken_back(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    granted = granted_behind_a_holder(srt)
    queue.held = 1_000  # a backlog: no message is sent again
    for _ in range(3):
        clock.advance(resources.GRANT_TIMEOUT_MS)
        assert sweep(srt).slots_reclaimed == 0
    waiter = submit(srt, "waiter")
    assert execution.execute(srt, waiter) == "waiting"
    ended = record(srt, granted)
    assert ended.deadline_at is not None
    clock.advance(ended.deadline_at - clock.now)
    report = sweep(srt)
    # Past its deadline the granted job can no longer run: its verdict ends it, and its slot
    # goes to the next waiter.
    assert (report.slots_reclaimed, report.waiters_woken) == (1, 1)
    assert record(srt, granted).status.value == "expired"
    assert holders(srt).keys() == {waiter}


def test_a_slot_granted_to_a_job_sent_to_run_again_is_kept_for_its_run(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    """A running job whose worker died is sent again (the sweep's re-run) and may have to wait
    for a slot; the slot a release grants it is its re-run's, not its dead worker's: kept until
    the job runs, which it then does (a source's limit never turned into a failed job)."""
    holder, other = submit(srt, "holder"), submit(srt, "other")
    assert resources.take_slot(srt, resource(srt), record(srt, holder))
    assert execution.claim(srt, holder, "worker-that-died") is not None
    assert execution.execute(srt, other) == "waiting"
    queue.held = 1_000  # a backlog: the sweep sends nothing on the queue's count
    clock.advance(srt.settings.lease_ms + 1)
    assert sweep(srt).jobs_rerun == 1  # its dead worker's slot given back, to `other`
    assert execution.execute(srt, holder) == "waiting"  # its re-run waits for a slot
    late = submit(srt, "late")
    assert execution.execute(srt, late) == "waiting"
    clock.advance(1_000)
    assert execution.execute(srt, other) == "succeeded"  # its release grants `holder`
    assert holders(srt).keys() == {holder}
    clock.advance(30_000)
    report = sweep(srt)  # before the re-run's message is taken up
    assert report.slots_reclaimed == 0
    assert holders(srt).keys() == {holder}
    assert execution.execute(srt, holder) == "succeeded"
    assert execution.execute(srt, late) == "succeeded"


def test_a_waiter_the_sweep_wakes_is_sent_once(
    srt: Runtime, scripted: Script, clock: Clock, queue: WorkQueue
) -> None:
    """The job pass does not send again, on its age, a waiter the same sweep just granted a
    slot and sent."""
    holder, waiter = submit(srt, "holder"), submit(srt, "waiter")
    assert resources.take_slot(srt, resource(srt), record(srt, holder))
    assert execution.claim(srt, holder, "worker-that-died") is not None
    assert execution.execute(srt, waiter) == "waiting"
    queue.held = 1_000  # a backlog: the queue's count never says a message is lost
    queue.sent.clear()
    clock.advance(8 * 60_000)  # the holder's lease lapsed; the waiter waited past the bound
    report = sweep(srt)
    assert report.waiters_woken == 1
    assert [sent.job_id for sent in queue.sent].count(waiter) == 1


@pytest.mark.parametrize("holder_was", ["granted", "running"])
def test_the_sweep_never_takes_back_a_slot_being_taken_up(
    srt: Runtime, scripted: Script, clock: Clock, monkeypatch: pytest.MonkeyPatch, holder_was: str
) -> None:
    job_id, waiter = submit(srt, "taken-up"), submit(srt, "waits")
    limit = resource(srt)
    assert resources.take_slot(srt, limit, record(srt, job_id))
    if holder_was == "running":
        assert execution.claim(srt, job_id, "worker-that-died") is not None
        clock.advance(1)
    assert execution.execute(srt, waiter) == "waiting"
    if holder_was == "granted":
        # Its deadline passed with its message still on the way: the sweep judges it gone.
        deadline_at = record(srt, job_id).deadline_at
        assert deadline_at is not None
        clock.advance(deadline_at - clock.now)
    else:
        clock.advance(srt.settings.lease_ms)  # its worker died: the lease lapsed
    original = srt.store.get_job_items
    raced: list[bool] = []

    def racing_read(job_ids: list[str]) -> Any:
        found = original(job_ids)
        if not raced:  # the job's message, at a worker, between the sweep's read and release
            raced.append(resources.take_slot(srt, limit, record(srt, job_id)) is not None)
            raced.append(execution.claim(srt, job_id, "taker") is not None)
        return found

    monkeypatch.setattr(srt.store, "get_job_items", racing_read)
    report = sweep(srt)
    assert raced == [True, True]
    assert (report.slots_reclaimed, report.waiters_woken) == (0, 0)
    assert holders(srt).keys() == {job_id}  # never more holders than the limit
    assert srt.store.resources().waiting_jobs(RESOURCE) == [waiter]


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
