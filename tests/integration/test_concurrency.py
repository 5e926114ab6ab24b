"""Racing writers: the loser of every race is a no-op, never a duplicate (design I2, I6)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from jobstream.service import admission, jobs, stream
from jobstream.service.runtime import Runtime
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import mark_failed

T = TypeVar("T")
RACERS = 4


def race(action: Callable[[], T], racers: int = RACERS) -> list[T]:
    """Run `action` in several threads released at the same instant."""
    barrier = threading.Barrier(racers)

    def run() -> T:
        barrier.wait()
        return action()

    with ThreadPoolExecutor(max_workers=racers) as pool:
        futures = [pool.submit(run) for _ in range(racers)]
        return [future.result() for future in futures]


def kinds(rt: Runtime, job_id: str) -> list[str]:
    events, _ = rt.store.events_after(job_id, 0, 200)
    return [event.kind for event in events]


def test_racing_admissions_make_one_job(rt: Runtime) -> None:
    results = race(lambda: admission.submit(rt, "acme", canonical_task(), None))
    statuses = sorted(status for status, _ in results)
    assert statuses == [200] * (RACERS - 1) + [202]
    job_ids = {body["job"]["job_id"] for _, body in results}
    assert len(job_ids) == 1
    (job_id,) = job_ids
    assert kinds(rt, job_id) == ["job.requested"]
    assert len(rt.store.callback_intents(job_id)) == 1


def test_racing_reconciles_record_one_terminal_event(rt: Runtime, api: Api, clock: Clock) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    stale = rt.store.get_job(job_id)
    assert stale is not None
    # Every racer starts from the same stale read, so each one tries to write the event.
    race(lambda: stream.reconcile(rt, stale))
    assert kinds(rt, job_id) == ["job.requested", "job.outcome_failed"]
    assert len(rt.store.callback_intents(job_id)) == 2
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.event_count == 2


def test_racing_cancels_record_one_cancelled_event(rt: Runtime, api: Api) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    bodies = race(lambda: jobs.cancel(rt, "acme", job_id, None))
    assert all(body["status"] == "cancelled" for body in bodies)
    assert len({body["updated_at"] for body in bodies}) == 1
    assert kinds(rt, job_id) == ["job.requested", "job.outcome_cancelled"]


def test_cancel_racing_a_terminal_state_change_keeps_one_terminal_event(
    rt: Runtime, api: Api, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    stale = rt.store.get_job(job_id)
    assert stale is not None
    # The job fails after the cancel read it as queued: the cancel's conditional write must lose.
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    reads = [stale]
    current = rt.store.get_job

    def first_read_is_stale(wanted: str) -> Any:
        return reads.pop() if reads and wanted == job_id else current(wanted)

    monkeypatch.setattr(rt.store, "get_job", first_read_is_stale)
    body = jobs.cancel(rt, "acme", job_id, None)
    assert not reads, "the cancel worked from the stale read"
    assert body["status"] == "failed"
    assert kinds(rt, job_id) == ["job.requested", "job.outcome_failed"]


def test_racing_acks_end_at_the_furthest(rt: Runtime, api: Api, clock: Clock) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    events = api.get(f"/jobs/{job_id}/events").body["events"]
    targets = iter([events[0]["event_id"], events[1]["event_id"]] * 2)
    lock = threading.Lock()

    def ack_one() -> dict[str, Any]:
        with lock:
            ack_through = next(targets)
        return stream.acknowledge(rt, "acme", job_id, {"ack_through": ack_through}, None)

    results = race(ack_one)
    assert all(result["acked"] + result["unacked"] == 2 for result in results)
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.ack_sequence == 2
