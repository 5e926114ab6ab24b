"""Per-tenant quotas: at most `max_open_jobs` open jobs and `admissions_per_minute` admissions a
minute, refused with 429 `quota_exceeded` (nothing written), never a replay; and a counter that
never drifts, however its jobs end."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jobstream import runtime as runtime_module
from jobstream.protocol.events import TERMINAL_KINDS
from jobstream.runtime import Runtime
from jobstream.service import admission, jobs
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.codec import from_item
from jobstream.store.ports import QuotaExceededError
from jobstream.store.quotas import MINUTE_MS, quota_key
from tests.support.faults import Faults, injected
from tests.support.harness import Api, Clock, Response, canonical_task
from tests.support.state import mark_failed, mark_running, mark_succeeded, whole_table
from tests.support.tenants import with_tenant

RACERS = 30


@pytest.fixture
def minute_start(clock: Clock) -> Clock:
    """The clock at the first second of a minute: a test's admissions share one window."""
    clock.now = (clock.now // MINUTE_MS + 1) * MINUTE_MS + 1_000
    return clock


def limited(rt: Runtime, monkeypatch: pytest.MonkeyPatch, **quotas: int | None) -> Runtime:
    """`rt` with tenant acme under `quotas`, for the handlers too."""
    runtime = with_tenant(rt, "acme", quotas=quotas)
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    return runtime


def task(n: int) -> dict[str, Any]:
    return canonical_task(idempotency_key=f"quota-{n:04d}")


def counter(rt: Runtime, tenant: str = "acme") -> dict[str, Any] | None:
    item = rt.store.client.get_item(
        TableName=rt.settings.table_name, Key=quota_key(tenant), ConsistentRead=True
    ).get("Item")
    return from_item(item) if item else None


def open_jobs(rt: Runtime, tenant: str = "acme") -> int:
    return int((counter(rt, tenant) or {}).get("open_jobs", 0))


def job_items(rt: Runtime) -> int:
    return sum(1 for _, sk in whole_table(rt) if sk == keys.JOB_SK)


def assert_quota_refusal(response: Response, quota: str, limit: int) -> None:
    assert response.status == 429, response.body
    error = response.body["error"]
    assert error["code"] == "quota_exceeded"
    assert error["retryable"] is True
    assert error["detail"] == {"reason": "quota_exceeded", "quota": quota, "limit": limit}
    assert int(response.headers["retry-after"]) >= 1


def race(action: Any, racers: int = RACERS) -> list[Any]:
    """Run `action(i)` in `racers` threads released at the same instant (the API's function
    loaded first: a Lambda's module is imported once, before requests)."""
    assert Api(token="acme-token").post("/jobs", {}).status == 400
    barrier = threading.Barrier(racers)

    def run(index: int) -> Any:
        barrier.wait()
        return action(index)

    with ThreadPoolExecutor(max_workers=racers) as pool:
        return list(pool.map(run, range(racers)))


# -- without quotas ---------------------------------------------------------------------------


def test_a_tenant_without_quotas_writes_no_counter(rt: Runtime, api: Api) -> None:
    assert api.post("/jobs", task(1)).status == 202
    assert counter(rt) is None
    (job,) = [item for (_, sk), item in whole_table(rt).items() if sk == keys.JOB_SK]
    assert "quota_counted" not in job


# -- max_open_jobs ----------------------------------------------------------------------------


def test_over_max_open_jobs_is_a_429_that_writes_nothing(
    rt: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = limited(rt, monkeypatch, max_open_jobs=2)
    assert [api.post("/jobs", task(n)).status for n in (1, 2)] == [202, 202]
    before = whole_table(rt)
    refused = api.post("/jobs", task(3))
    assert_quota_refusal(refused, "max_open_jobs", 2)
    assert whole_table(rt) == before
    assert open_jobs(rt) == 2


def test_a_replay_is_answered_over_quota(
    rt: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = limited(rt, monkeypatch, max_open_jobs=1, admissions_per_minute=1)
    first = api.post("/jobs", task(1))
    assert first.status == 202
    assert api.post("/jobs", task(2)).status == 429
    before = whole_table(rt)
    replay = api.post("/jobs", task(1))
    assert replay.status == 200
    assert replay.body["job"]["job_id"] == first.body["job"]["job_id"]
    assert whole_table(rt) == before


def test_a_finished_job_frees_its_slot(
    rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = limited(rt, monkeypatch, max_open_jobs=1)
    job_id = api.post("/jobs", task(1)).body["job"]["job_id"]
    assert api.post("/jobs", task(2)).status == 429
    jobs.cancel(rt, "acme", job_id, None)
    assert open_jobs(rt) == 0
    assert api.post("/jobs", task(2)).status == 202
    # The cancelled job's replay is still a replay, and counts nothing.
    assert api.post("/jobs", task(1)).status == 200
    assert open_jobs(rt) == 1


def test_a_job_the_sweep_expires_frees_its_slot(
    rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = limited(rt, monkeypatch, max_open_jobs=1)
    job_id = api.post("/jobs", task(1)).body["job"]["job_id"]
    clock.advance(rt.settings.queued_timeout_ms + 1)
    sweep(rt)
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.status == "expired"
    assert open_jobs(rt) == 0
    assert api.post("/jobs", task(2)).status == 202


def test_a_job_counted_before_its_quotas_were_removed_is_still_released(
    rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = limited(rt, monkeypatch, max_open_jobs=5)
    job_id = api.post("/jobs", task(1)).body["job"]["job_id"]
    unlimited = limited(counted, monkeypatch, max_open_jobs=None, admissions_per_minute=None)
    uncounted = api.post("/jobs", task(2)).body["job"]["job_id"]
    assert open_jobs(unlimited) == 1
    jobs.cancel(unlimited, "acme", job_id, None)
    assert open_jobs(unlimited) == 0
    # A job admitted without quotas is never counted, so never released: no negative count.
    limited(unlimited, monkeypatch, max_open_jobs=5)
    jobs.cancel(unlimited, "acme", uncounted, None)
    assert open_jobs(unlimited) == 0


# -- admissions_per_minute --------------------------------------------------------------------


def test_over_admissions_per_minute_waits_for_the_next_window(
    rt: Runtime, api: Api, minute_start: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = limited(rt, monkeypatch, admissions_per_minute=3)
    assert [api.post("/jobs", task(n)).status for n in range(3)] == [202] * 3
    minute_start.advance(20_000)
    before = whole_table(rt)
    refused = api.post("/jobs", task(3))
    assert_quota_refusal(refused, "admissions_per_minute", 3)
    # The window ends 39 s later (the clock is 21 s into its minute).
    assert refused.headers["retry-after"] == "39"
    assert whole_table(rt) == before
    minute_start.advance(39_000)
    assert api.post("/jobs", task(3)).status == 202
    state = counter(rt)
    assert state is not None
    assert state["window_admissions"] == 1
    assert state["open_jobs"] == 4


def test_a_window_an_admission_with_a_later_clock_started_is_counted_in(
    rt: Runtime, minute_start: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = limited(rt, monkeypatch, admissions_per_minute=2)
    minute_start.advance(MINUTE_MS)
    admission.submit(rt, "acme", task(1), None)
    # Another function's clock is a little behind, still in the minute before.
    minute_start.advance(-2_000)
    status, _ = admission.submit(rt, "acme", task(2), None)
    assert status == 202
    state = counter(rt)
    assert state is not None
    assert (state["window_minute"], state["window_admissions"]) == (
        (minute_start.now + 2_000) // MINUTE_MS,
        2,
    )


# -- racing admissions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quotas", "limit"),
    [({"max_open_jobs": 7}, 7), ({"admissions_per_minute": 11}, 11)],
    ids=["max_open_jobs", "admissions_per_minute"],
)
@pytest.mark.usefixtures("minute_start")
def test_racing_admissions_never_pass_the_quota(
    rt: Runtime,
    api: Api,
    monkeypatch: pytest.MonkeyPatch,
    quotas: dict[str, int],
    limit: int,
) -> None:
    rt = limited(rt, monkeypatch, **quotas)
    (quota,) = quotas
    answers = race(lambda n: api.post("/jobs", task(n)))
    statuses = sorted(answer.status for answer in answers)
    assert statuses == [202] * limit + [429] * (RACERS - limit)
    for answer in answers:
        if answer.status == 429:
            assert_quota_refusal(answer, quota, limit)
    assert job_items(rt) == limit
    assert open_jobs(rt) == limit


def test_racing_replays_at_the_quota_are_answered(
    rt: Runtime, api: Api, minute_start: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = limited(rt, monkeypatch, max_open_jobs=5, admissions_per_minute=5)
    admitted = {n: api.post("/jobs", task(n)).body["job"]["job_id"] for n in range(5)}
    # Replays of the five admitted keys race new keys, all at the limit.
    answers = race(lambda n: (n, api.post("/jobs", task(n % 10))))
    for n, answer in answers:
        if n % 10 < 5:
            assert answer.status == 200
            assert answer.body["job"]["job_id"] == admitted[n % 10]
        else:
            assert answer.status == 429
    assert job_items(rt) == 5
    assert open_jobs(rt) == 5


def test_a_refusal_that_raced_the_same_key_is_a_replay(
    rt: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the refusal reports, a key another request admitted meanwhile is a replay."""
    rt = limited(rt, monkeypatch, max_open_jobs=1)
    create = rt.store.create_job

    def admitted_by_another_then_refused(record: Any, first: Any, **kwargs: Any) -> bool:
        assert create(record, first, **kwargs)
        raise QuotaExceededError("acme", "max_open_jobs", 1, 5)

    monkeypatch.setattr(rt.store, "create_job", admitted_by_another_then_refused)
    answer = api.post("/jobs", task(1))
    assert answer.status == 200
    assert open_jobs(rt) == 1


# -- faults and drift -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["before", "after"])
def test_a_failed_admission_counts_nothing_twice(
    rt: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A conflict on the counter outlasting the retries is a retryable 503 with nothing
    written; an admission whose answer was lost is counted once (its retry is a replay)."""
    rt = limited(rt, monkeypatch, max_open_jobs=3)
    with injected(Faults(kinds=("conflict",), mode=mode, at=1, times=100, matching="QUOTA#")):
        answer = api.post("/jobs", task(1))
    if mode == "before":
        assert answer.status == 503
        assert answer.body["error"]["code"] == "resource_busy"
        assert answer.body["error"]["retryable"] is True
        assert job_items(rt) == 0
        assert counter(rt) is None
    else:
        # Applied, its answer lost, every retry refused: the client's own retry is a replay.
        assert answer.status in {202, 503}
        assert api.post("/jobs", task(1)).status == 200
        assert open_jobs(rt) == 1
    assert api.post("/jobs", task(1)).status in {200, 202}
    assert open_jobs(rt) == 1


def test_a_conflict_on_the_counter_is_retried_not_answered(
    rt: Runtime, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admissions racing on a tenant's counter cancel each other's transactions
    (TransactionConflict): each is tried again at once, and counted once."""
    rt = limited(rt, monkeypatch, max_open_jobs=3, admissions_per_minute=10)
    with injected(Faults(kinds=("conflict",), matching="QUOTA#")) as faults:
        answers = [api.post("/jobs", task(n)).status for n in range(3)]
    assert answers == [202, 202, 202]
    assert faults.fired >= 3
    assert open_jobs(rt) == 3
    assert api.post("/jobs", task(3)).status == 429


def test_the_counter_never_drifts(
    rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random histories of admissions, replays, runs and every way a job ends: the counter is
    always the number of open counted jobs, and the quota always holds."""
    rt = limited(rt, monkeypatch, max_open_jobs=4)
    chance = random.Random(25)  # noqa: S311 - a reproducible history, not a secret
    admitted: list[str] = []
    for step in range(60):
        action = chance.choice(["admit", "admit", "replay", "run", "finish", "cancel", "tick"])
        open_ids = [job_id for job_id in admitted if not _finished(rt, job_id)]
        if action == "admit":
            answer = api.post("/jobs", task(step))
            assert answer.status == (202 if len(open_ids) < 4 else 429)
            if answer.status == 202:
                admitted.append(answer.body["job"]["job_id"])
        elif action == "replay" and admitted:
            assert api.post("/jobs", task(_step_of(rt, chance.choice(admitted)))).status == 200
        elif action == "run" and open_ids:
            mark_running(rt, chance.choice(open_ids), at=clock.now, lease_until=clock.now + 1)
        elif action == "finish" and open_ids:
            _finish(rt, chance.choice(open_ids), clock, chance.choice(["ok", "failed", "stall"]))
        elif action == "cancel" and admitted:
            jobs.cancel(rt, "acme", chance.choice(admitted), None)
        elif action == "tick":
            clock.advance(chance.choice([1_000, rt.settings.queued_timeout_ms]))
            sweep(rt)
        still_open = [job_id for job_id in admitted if not _finished(rt, job_id)]
        assert open_jobs(rt) == len(still_open) <= 4


def _finished(rt: Runtime, job_id: str) -> bool:
    record = rt.store.get_job(job_id)
    assert record is not None
    # Finished for the counter once its terminal event is recorded (the state may come first).
    return bool(record.recorded_kinds & TERMINAL_KINDS)


def _step_of(rt: Runtime, job_id: str) -> int:
    record = rt.store.get_job(job_id)
    assert record is not None
    return int(record.idempotency_key.rsplit("-", 1)[1])


def _finish(rt: Runtime, job_id: str, clock: Clock, how: str) -> None:
    """End the job's state as a worker or a verdict would, then let the sweep record it."""
    if how == "ok":
        mark_succeeded(rt, job_id, at=clock.now)
    elif how == "failed":
        mark_failed(rt, job_id, at=clock.now, reason="no_candidate")
    else:
        mark_failed(rt, job_id, at=clock.now, reason="stalled_no_heartbeat", status="expired")
    sweep(rt)
