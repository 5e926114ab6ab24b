"""Racing writers: the loser of every race is a no-op, never a duplicate (design I2, I6)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from jobstream.lifecycle import log
from jobstream.runtime import Runtime
from jobstream.service import admission, jobs
from jobstream.service import events as stream
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import callback_intents, mark_failed

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
    assert len(callback_intents(rt, job_id)) == 1


def test_racing_reconciles_record_one_terminal_event(rt: Runtime, api: Api, clock: Clock) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    stale = rt.store.get_job(job_id)
    assert stale is not None
    # Every racer starts from the same stale read, so each one tries to write the event.
    race(lambda: log.reconcile(rt, stale))
    assert kinds(rt, job_id) == ["job.requested", "job.outcome_failed"]
    assert len(callback_intents(rt, job_id)) == 2
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


def _terminal_snapshots_are_terminal(page: dict[str, Any]) -> list[str]:
    """The terminal events of a page whose embedded job is not the job they end."""
    ends = {"job.succeeded": "succeeded", "job.failed": "failed", "job.cancelled": "cancelled"}
    stale = []
    for event in page["events"]:
        status = ends.get(event["type"])
        if status is None:
            continue
        payload = event["payload"]
        if payload["job"]["status"] != status or (
            status == "succeeded" and payload["result"] is None
        ):
            stale.append(f"{event['type']} shows {payload['job']['status']}")
    return stale


def test_a_page_read_across_a_completion_shows_the_terminal_job(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobstream.jobtypes.runner import Outcome
    from jobstream.service import execution

    job_id = api_submit(rt)
    events_after = rt.store.events_after
    landed: list[str] = []

    def completion_lands_between_the_reads(*args: Any, **kwargs: Any) -> Any:
        # The page has read the job (queued); the worker claims and completes before the query.
        if not landed:
            claimed = execution.claim(rt, job_id, "worker-1")
            assert claimed is not None
            result = {"candidates": [], "scanned": 3}
            landed.append(execution.complete(rt, claimed, "worker-1", Outcome(result=result)))
        return events_after(*args, **kwargs)

    monkeypatch.setattr(rt.store, "events_after", completion_lands_between_the_reads)
    page = stream.events_page(rt, "acme", job_id, {}, None)
    assert landed == ["succeeded"]
    assert [event["type"] for event in page["events"]] == [
        "job.accepted",
        "job.started",
        "job.succeeded",
    ]
    assert _terminal_snapshots_are_terminal(page) == []
    assert page["events"][-1]["payload"]["result"] == {"candidates": [], "scanned": 3}
    assert page["unacked"] == 3


def test_a_page_whose_job_knows_later_events_says_more_follow(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job read again after the query may count an event committed after it: the page
    counts it as unacked and gives `next_after`, so the consumer reads it next."""
    from jobstream.jobtypes.runner import Outcome
    from jobstream.service import execution

    job_id = api_submit(rt, key="later-events")
    events_after, get_job = rt.store.events_after, rt.store.get_job
    claimed: list[Any] = []

    def claim_before_the_query(*args: Any, **kwargs: Any) -> Any:
        if not claimed:
            claimed.append(execution.claim(rt, job_id, "worker-1"))
        return events_after(*args, **kwargs)

    def complete_before_the_second_read(wanted: str) -> Any:
        if claimed and claimed[0] is not None:
            record, claimed[0] = claimed[0], None
            result = Outcome(result={"candidates": [], "scanned": 1})
            assert execution.complete(rt, record, "worker-1", result) == "succeeded"
        return get_job(wanted)

    monkeypatch.setattr(rt.store, "events_after", claim_before_the_query)
    monkeypatch.setattr(rt.store, "get_job", complete_before_the_second_read)
    page = stream.events_page(rt, "acme", job_id, {}, None)
    assert [event["type"] for event in page["events"]] == ["job.accepted", "job.started"]
    assert page["unacked"] == 3
    assert page["next_after"] == page["events"][-1]["event_id"]
    monkeypatch.undo()
    rest = stream.events_page(rt, "acme", job_id, {"after": [page["next_after"]]}, None)
    assert [event["type"] for event in rest["events"]] == ["job.succeeded"]
    assert "next_after" not in rest


def test_concurrent_readers_never_see_a_stale_terminal_job(rt: Runtime) -> None:
    """Readers page the stream while the worker runs the job: every terminal event they see,
    on any page, carries its terminal job (the consumer keeps the first copy of each event)."""
    from jobstream.service import execution

    job_ids = [api_submit(rt, key=f"stale-{index}") for index in range(3)]
    stale: list[str] = []
    done = threading.Event()

    def read_until_done() -> int:
        pages = 0
        while not done.is_set():
            for job_id in job_ids:
                stale.extend(
                    _terminal_snapshots_are_terminal(
                        stream.events_page(rt, "acme", job_id, {}, None)
                    )
                )
                pages += 1
        return pages

    with ThreadPoolExecutor(max_workers=RACERS + 1) as pool:
        readers = [pool.submit(read_until_done) for _ in range(RACERS)]
        try:
            for job_id in job_ids:
                assert execution.execute(rt, job_id) == "succeeded"
        finally:
            done.set()
        pages = sum(reader.result() for reader in readers)
    assert pages > 0
    assert stale == []


def api_submit(rt: Runtime, key: str = "stale-page") -> str:
    task = canonical_task(idempotency_key=key, callback_url=None)
    task["params"] = {"query": {"tags": ["botefuku"]}}
    status, body = admission.submit(rt, "acme", task, None)
    assert status == 202
    job_id: str = body["job"]["job_id"]
    return job_id


def test_two_copies_of_a_work_message_run_the_job_once(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQS delivers one work message twice, the second copy while the first runs the job (a
    standard queue may, even at once): the job runs once, and its result and terminal event are
    written once, never rewritten."""
    from jobstream.service import execution

    job_id = api_submit(rt, key="copied-message")
    body = json.dumps({"job_id": job_id})
    running, copy_done = threading.Event(), threading.Event()
    runs: list[str] = []
    run_job = execution.run_job

    def first_run_waits_for_the_copy(targets: Any, record: Any, context: Any) -> Any:
        runs.append(record.job_id)
        if len(runs) == 1:
            running.set()
            copy_done.wait(10)
        return run_job(targets, record, context)

    monkeypatch.setattr(execution, "run_job", first_run_waits_for_the_copy)
    writes: list[str] = []

    def count_writes(model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body", b"")
        text = body.decode() if isinstance(body, bytes) else str(body)
        if model.name in {"PutItem", "TransactWriteItems"}:
            writes.extend(kind for kind in ("#RESULT", "job.outcome_succeeded") if kind in text)

    events = rt.store.client.meta.events
    events.register("before-call.dynamodb", count_writes, unique_id="count-writes")
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            first = pool.submit(execution.handle_work_message, rt, body, "message-1")
            assert running.wait(10)
            copy = execution.handle_work_message(rt, body, "message-1")
            copy_done.set()
            assert first.result() == "succeeded"
    finally:
        events.unregister("before-call.dynamodb", unique_id="count-writes")
    assert copy == "not-claimed"
    assert runs == [job_id]
    assert writes.count("#RESULT") == 1
    assert writes.count("job.outcome_succeeded") == 1
    assert kinds(rt, job_id).count("job.outcome_succeeded") == 1
    job = rt.store.get_job(job_id)
    assert job is not None
    assert job.status == "succeeded"
    assert job.attempt == 1
