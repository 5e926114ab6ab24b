"""`job.progress` events carry the progress they report (they used to carry only their kind).

Each progress event keeps its stage and message on its own item, so its payload is the same on
every read and in its callback, whatever the job reports later; the item stays one write unit.
"""

from __future__ import annotations

import json
from typing import Any

from jobstream.jobtypes.base import Outcome
from jobstream.runtime import Runtime
from jobstream.service import admission, execution, jobs
from jobstream.service import events as stream
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
            lease.progress(stage, message)
            clock.advance(6_000)

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
