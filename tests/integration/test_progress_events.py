"""`job.progress` events carry the progress they report (they used to carry only their kind),
and come no sooner than 5 s after the job's last event.

Each progress event keeps its stage and message on its own item, so its payload is the same on
every read and in its callback, whatever the job reports later; the item stays one write unit.
A report too soon after the last event (or past the per-job cap) is no event: the lease's next
heartbeat shows it on the job, in the write it makes anyway.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from jobstream.jobtypes.base import Outcome
from jobstream.protocol.errors import Reason
from jobstream.runtime import Runtime
from jobstream.service import admission, execution, jobs
from jobstream.service import events as stream
from jobstream.store import keys
from jobstream.store.budgets import MAX_PROGRESS_MESSAGE_BYTES, MAX_PROGRESS_STAGE_BYTES
from jobstream.store.item_size import item_size
from tests.integration.test_callbacks import drain
from tests.support.harness import Clock, canonical_task
from tests.support.receiver import receiver
from tests.support.state import whole_table
from tests.support.validation import validate

WRITE_UNIT_BYTES = 1024
# What the executor reports, in order, 6 s apart (progress is kept at most once per 5 s).
REPORTED = [
    ("searching", "searching 1 tag(s)"),
    ("searching", "scanned 10 of 60 works"),
    ("ranking", None),
    ("西" * 200, "\U0001f600" * 400),  # far over what an event keeps: clipped, in bytes
]


def _progress_events(rt: Runtime, job_id: str) -> list[dict[str, Any]]:
    page = stream.events_page(rt, "acme", job_id, {}, None)
    validate(page, "EventPage")
    for event in page["events"]:
        validate(event, "Event")
    return [event for event in page["events"] if event["type"] == "job.progress"]


def test_each_progress_event_carries_what_it_reported_on_every_read_and_callback(
    crt: Runtime, clock: Clock, queues: dict[str, Any]
) -> None:
    with receiver(204) as hook:
        task = canonical_task(idempotency_key="progress-payload", callback_url=hook.url)
        status, body = admission.submit(crt, "acme", task, None)
        assert status == 202
        job_id = body["job"]["job_id"]
        record = execution.claim(crt, job_id, "worker-1")
        assert record is not None
        lease = execution.Lease(crt, record, "worker-1")
        for stage, message in REPORTED:
            clock.advance(6_000)
            lease.progress(stage, message)

        shown = _progress_events(crt, job_id)
        assert [event["payload"]["progress"] for event in shown[:3]] == [
            {"stage": "searching", "message": "searching 1 tag(s)", "at": shown[0]["at"]},
            {"stage": "searching", "message": "scanned 10 of 60 works", "at": shown[1]["at"]},
            {"stage": "ranking", "at": shown[2]["at"]},
        ]
        clipped = shown[3]["payload"]["progress"]
        assert len(clipped["stage"].encode()) <= MAX_PROGRESS_STAGE_BYTES
        assert len(clipped["message"].encode()) <= MAX_PROGRESS_MESSAGE_BYTES
        assert clipped["stage"].startswith("西")
        assert clipped["message"].endswith("…")
        # The job shows the latest report, the same words as its event.
        job = jobs.get_job(crt, "acme", job_id, None)
        assert (job["progress"]["stage"], job["progress"]["message"]) == (
            clipped["stage"],
            clipped["message"],
        )

        # Later reports and the job's end change nothing an event said.
        finished = execution.complete(
            crt, lease.record, "worker-1", Outcome(result={"candidates": [], "scanned": 0})
        )
        assert finished == "succeeded"
        assert _progress_events(crt, job_id) == shown
        drain(crt, queues, rounds=20)
        posted = [json.loads(request.body) for request in hook.requests]
    by_id = {event["event_id"]: event for event in posted if event["type"] == "job.progress"}
    assert [by_id.get(event["event_id"]) for event in shown] == shown

    # Each progress event's item, its delivered callback included, is one write unit.
    progress_items = [
        item
        for (pk, sk), item in whole_table(crt).items()
        if pk == f"JOB#{job_id}" and item.get("kind", {}).get("S") == "job.progressed"
    ]
    assert len(progress_items) == len(REPORTED)
    assert max(map(item_size, progress_items)) <= WRITE_UNIT_BYTES


# -- the 5 s window and the heartbeat ---------------------------------------------------------


def _claimed(rt: Runtime, key: str) -> tuple[str, execution.Lease]:
    status, body = admission.submit(rt, "acme", canonical_task(idempotency_key=key), None)
    assert status == 202
    job_id = body["job"]["job_id"]
    record = execution.claim(rt, job_id, "worker-1")
    assert record is not None
    return job_id, execution.Lease(rt, record, "worker-1")


def _kinds(rt: Runtime, job_id: str) -> list[str]:
    page = stream.events_page(rt, "acme", job_id, {}, None)
    return [event["type"] for event in page["events"]]


def _shown(rt: Runtime, job_id: str) -> dict[str, Any]:
    progress: dict[str, Any] = jobs.get_job(rt, "acme", job_id, None)["progress"]
    return progress


@contextmanager
def _dynamodb_writes(rt: Runtime) -> Iterator[list[str]]:
    """The names of the DynamoDB write requests made meanwhile."""
    writes: list[str] = []

    def note(model: Any, **_: Any) -> None:
        if model.name in {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"}:
            writes.append(model.name)

    events = rt.store.client.meta.events
    events.register("before-call.dynamodb", note)
    try:
        yield writes
    finally:
        events.unregister("before-call.dynamodb", note)


def test_no_progress_event_within_5_s_of_the_start(rt: Runtime, clock: Clock) -> None:
    """A report within 5 s of `job.started` is no event; the first one 5 s after it is."""
    job_id, lease = _claimed(rt, "window")
    with _dynamodb_writes(rt) as writes:
        lease.progress("searching", "searching 1 tag(s)")
        clock.advance(4_999)
        lease.progress("searching", "scanned 10 of 60 works")
    assert writes == []  # dropped reports write nothing
    assert _kinds(rt, job_id) == ["job.accepted", "job.started"]
    clock.advance(1)
    lease.progress("ranking")
    assert _kinds(rt, job_id) == ["job.accepted", "job.started", "job.progress"]
    # The next window counts from that event.
    clock.advance(4_999)
    lease.progress("ranking", "ranked 5")
    assert _kinds(rt, job_id).count("job.progress") == 1
    clock.advance(1)
    lease.progress("ranking", "ranked 10")
    assert _kinds(rt, job_id).count("job.progress") == 2


def test_a_quick_run_writes_no_progress_event(rt: Runtime) -> None:
    """A run shorter than 5 s: started, then its outcome; what it reported is not written."""
    job_id, lease = _claimed(rt, "quick")
    lease.progress("searching", "scanned 60 works")
    finished = execution.complete(
        rt, lease.record, "worker-1", Outcome(result={"candidates": [], "scanned": 60})
    )
    assert finished == "succeeded"
    assert _kinds(rt, job_id) == ["job.accepted", "job.started", "job.succeeded"]


def test_a_dropped_report_shows_on_the_job_with_the_next_heartbeat(
    rt: Runtime, clock: Clock
) -> None:
    job_id, lease = _claimed(rt, "shown")
    first_stage = _shown(rt, job_id)["stage"]
    clock.advance(1_000)
    lease.progress("searching", "scanned 10 of 60 works")
    lease.progress("searching", "\U0001f600" * 400)  # the latest report, clipped as an event's
    assert _shown(rt, job_id)["stage"] == first_stage
    clock.advance(1_000)
    before = whole_table(rt)
    with _dynamodb_writes(rt) as writes:
        assert lease.beat()
    assert writes == ["UpdateItem"]  # the heartbeat's own write, no other
    shown = _shown(rt, job_id)
    assert shown["stage"] == "searching"
    assert len(shown["message"].encode()) <= MAX_PROGRESS_MESSAGE_BYTES
    assert shown["message"].endswith("…")
    assert shown["at"] == clock.now
    job = jobs.get_job(rt, "acme", job_id, None)
    validate(job, "Job")
    assert job["heartbeat_at"] == clock.now
    # The job item alone changed: no event, no callback.
    after = whole_table(rt)
    job_item = (keys.job_pk(job_id), keys.JOB_SK)
    assert {key for key in after if after[key] != before.get(key)} <= {job_item}
    assert _kinds(rt, job_id) == ["job.accepted", "job.started"]
    # Shown once: the next heartbeat only renews the lease.
    clock.advance(1_000)
    lease.beat()
    assert _shown(rt, job_id)["at"] == clock.now - 1_000
    # A report that was an event is not shown again over a later one.
    clock.advance(5_000)
    lease.progress("ranking", "ranked 5")
    lease.beat()
    assert (_shown(rt, job_id)["stage"], _shown(rt, job_id)["message"]) == ("ranking", "ranked 5")


def test_a_report_dropped_before_an_event_is_not_shown_after_it(rt: Runtime, clock: Clock) -> None:
    job_id, lease = _claimed(rt, "superseded")
    clock.advance(6_000)
    lease.progress("searching", "scanned 10")  # an event
    clock.advance(1_000)
    lease.progress("searching", "scanned 20")  # dropped
    clock.advance(5_000)
    lease.progress("ranking")  # an event: it carries the latest
    lease.beat()
    assert _shown(rt, job_id) == {"stage": "ranking", "at": clock.now}
    assert _kinds(rt, job_id).count("job.progress") == 2


def test_the_cap_of_50_events_holds_and_later_reports_show_with_heartbeats(
    rt: Runtime, clock: Clock
) -> None:
    # A lease that outlasts the 400 s without a heartbeat (one lapsed is lost for good).
    rt = replace(rt, settings=rt.settings.model_copy(update={"lease_ms": 600_000}))
    job_id, lease = _claimed(rt, "cap")
    for index in range(400):
        clock.advance(1_000)
        lease.progress("searching", f"scanned {index}")
    # One per 5 s over 400 s would be 80; the per-job cap is 50.
    assert _kinds(rt, job_id).count("job.progress") == execution.MAX_PROGRESS_EVENTS
    assert _shown(rt, job_id)["message"] == "scanned 249"  # the 50th event's, at 250 s
    lease.beat()
    assert _shown(rt, job_id)["message"] == "scanned 399"
    assert _kinds(rt, job_id).count("job.progress") == execution.MAX_PROGRESS_EVENTS


def test_the_next_attempt_reports_no_sooner_than_5_s_after_the_retry_wait_event(
    rt: Runtime, clock: Clock
) -> None:
    """The retry's `retry_wait` progress event is the run's last event: the next attempt's
    reports are spaced from it, and a report from before it is not shown after it."""
    job_id, lease = _claimed(rt, "retry")
    clock.advance(1_000)
    lease.progress("searching", "attempt 1 scanned 10")  # dropped, then made stale by the retry
    failed = Outcome(reason=Reason.NETWORK_ERROR, message="connection reset")
    lease.wait_to_retry(2_000, failed)  # the runtime's sleep moves the test clock on
    retried_at = lease.record.last_event_at
    assert clock.now >= retried_at + 2_000
    assert _kinds(rt, job_id) == ["job.accepted", "job.started", "job.progress"]
    assert lease.record.attempt == 2
    lease.beat()
    assert _shown(rt, job_id)["stage"] == execution.RETRY_WAIT_STAGE
    clock.advance(retried_at + 4_999 - clock.now)
    lease.progress("searching", "attempt 2 scanned 10")
    assert _kinds(rt, job_id).count("job.progress") == 1
    lease.beat()
    assert _shown(rt, job_id)["message"] == "attempt 2 scanned 10"
    clock.advance(1)
    lease.progress("searching", "attempt 2 scanned 20")
    assert _kinds(rt, job_id).count("job.progress") == 2
    assert _shown(rt, job_id)["message"] == "attempt 2 scanned 20"


def test_a_dropped_report_without_a_message_shows_none(rt: Runtime, clock: Clock) -> None:
    job_id, lease = _claimed(rt, "no-message")
    clock.advance(6_000)
    lease.progress("searching", "scanned 10")  # an event
    clock.advance(1_000)
    lease.progress("ranking")  # dropped: its stage alone
    lease.beat()
    assert _shown(rt, job_id) == {"stage": "ranking", "at": clock.now}
