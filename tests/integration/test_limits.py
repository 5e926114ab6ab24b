"""What AWS refuses and moto alone would not show (issue 13, items 3, 4 and 7): items within
DynamoDB's 400 KB, event ids unique across jobs, answers within Lambda's 6 MB.

The local stack's moto sizes items by DynamoDB's rules (jobstream_local/moto_limits.py) and the
local gateway refuses a response larger than Lambda's, as AWS does: a test here fails on a 500.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobstream.domain import IntentRef
from jobstream.http.request import MAX_BODY_BYTES
from jobstream.http.statuses import http_status
from jobstream.jobtypes.runner import Outcome
from jobstream.protocol.errors import ProtocolError, Reason
from jobstream.protocol.events import callback_event_id
from jobstream.protocol.pages import MAX_RESPONSE_BYTES
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks, execution, jobs
from jobstream.service import events as stream
from jobstream.service.dead_letters import list_dead
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.budgets import (
    ADMITTED_JOB_BYTES,
    MAX_MESSAGE_CHARS,
    MAX_PROGRESS_MESSAGE_BYTES,
    RESULT_BYTES,
    result_size,
)
from jobstream.store.item_size import MAX_ITEM_BYTES, item_size
from tests.integration.test_callbacks import drain
from tests.support.event_ids import parse_event_id
from tests.support.harness import Api, Clock, canonical_task
from tests.support.receiver import receiver
from tests.support.state import callback_intents, whole_table
from tests.support.validation import validate

LABELS_205_KB = {f"label-{index:03d}": "v" * 1_000 for index in range(205)}


def run_task(**overrides: Any) -> dict[str, Any]:
    """A Task the reference target runs to success (the catalog holds `botefuku` works)."""
    task = canonical_task(**overrides)
    task["params"] = {"query": {"tags": ["botefuku"]}}
    return task


def largest_items(rt: Runtime) -> int:
    return max(item_size(item) for item in whole_table(rt).values())


def get_within_lambda(api: Api, target: str) -> Any:
    """The body of GET `target`, checked to fit in a Lambda response as the python3.11 runtime
    writes it (the local gateway would have answered 500 otherwise)."""
    response = api.get(target)
    assert response.status == 200, response.body
    body = json.dumps(response.body, ensure_ascii=False, separators=(",", ":"))
    assert len(json.dumps({"statusCode": 200, "headers": response.headers, "body": body})) <= (
        MAX_RESPONSE_BYTES
    )
    return response.body


# -- item 3: no item over 400 KB -------------------------------------------------------------


def test_a_job_with_205_kb_of_labels_and_a_callback_runs_cancels_and_calls_back(
    crt: Runtime, api: Api, clock: Clock, queues: dict[str, Any]
) -> None:
    """The issue's job: its terminal event embeds the labels twice. The callback intent names
    the event instead of copying it, so the job ends, cancel answers, the sweep passes, and
    each callback posts exactly the event its page shows."""
    with receiver(204) as hook:
        ran = run_task(idempotency_key="big-ran", labels=LABELS_205_KB, callback_url=hook.url)
        cancelled = run_task(
            idempotency_key="big-cancel", labels=LABELS_205_KB, callback_url=hook.url
        )
        ran_id = api.post("/jobs", ran).body["job"]["job_id"]
        cancelled_id = api.post("/jobs", cancelled).body["job"]["job_id"]
        assert execution.execute(crt, ran_id) == "succeeded"
        clock.advance(1_000)
        response = api.post(f"/jobs/{cancelled_id}/cancel")
        assert response.status == 200, response.body
        assert response.body["status"] == "cancelled"
        clock.advance(120_000)
        sweep(crt)
        drain(crt, queues, rounds=20)
        posted = {json.loads(request.body)["event_id"]: request.body for request in hook.requests}
    shown = {}
    for job_id in (ran_id, cancelled_id):
        page = api.get(f"/jobs/{job_id}/events").body
        validate(page, "EventPage")
        assert page["events"][-1]["type"] in {"job.succeeded", "job.cancelled"}
        shown |= {event["event_id"]: event for event in page["events"]}
    assert set(posted) == set(shown)
    for event_id, body in posted.items():
        assert _same_origin(json.loads(body)) == _same_origin(shown[event_id])
    assert largest_items(crt) <= MAX_ITEM_BYTES


def _same_origin(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its job's `events_url` as a path: absolute when the event was recorded
    by a request (its origin), relative when by the worker, whatever origin reads the page."""
    job = event.get("payload", {}).get("job")
    if job is not None:
        job["events_url"] = "/jobs/" + job["events_url"].split("/jobs/", 1)[1]
    return event


def _task_of_job_size(rt: Runtime, key: str, size: int) -> dict[str, Any]:
    """A Task whose job takes exactly `size` bytes as admission writes it: the label is sized
    from what admission reports of a larger one."""

    def task(label_chars: int) -> dict[str, Any]:
        exclude = [{"kind": "work", "id": f"{index:03d}" + "w" * 97} for index in range(100)]
        built = canonical_task(idempotency_key=key, labels={"l": "x" * label_chars})
        built["params"]["constraints"]["exclude"] = exclude
        return built

    probe = 260_000
    with pytest.raises(ProtocolError) as refused:
        admission.submit(rt, "acme", task(probe), None)
    measured = refused.value.body()["error"]["detail"]["size_bytes"]
    return task(probe - (measured - size))


def test_a_task_whose_job_is_over_its_budget_is_400_and_writes_nothing(rt: Runtime) -> None:
    """Labels, params (kept once, as their canonical text) and ids take at most 260 KiB of the
    job item; one byte more is refused with the sizes, and nothing is written. Every body the
    API accepts fits (tests/integration/test_body_limit.py): over HTTP such a Task is a 413
    first, and this check is admission's own guard."""
    over = _task_of_job_size(rt, "boundary-a", ADMITTED_JOB_BYTES + 1)
    at_budget = _task_of_job_size(rt, "boundary-b", ADMITTED_JOB_BYTES)
    assert len(json.dumps(over, separators=(",", ":")).encode()) > MAX_BODY_BYTES
    before = whole_table(rt)
    with pytest.raises(ProtocolError) as refused:
        admission.submit(rt, "acme", over, None)
    assert http_status(refused.value) == 400
    assert refused.value.body()["error"]["code"] == "invalid_params"
    assert refused.value.body()["error"]["detail"] == {
        "reason": "task_too_large",
        "size_bytes": ADMITTED_JOB_BYTES + 1,
        "limit_bytes": ADMITTED_JOB_BYTES,
    }
    assert whole_table(rt) == before
    status, body = admission.submit(rt, "acme", at_budget, None)
    assert status == 202, body
    job_id = body["job"]["job_id"]
    job_item = dict(whole_table(rt)[(f"JOB#{job_id}", "#JOB")])
    # Its first event's description rides on it until a later write: a growth of the item.
    job_item.pop(keys.PENDING_EVENT)
    assert item_size(job_item) == ADMITTED_JOB_BYTES


def _candidates(count: int, title_chars: int) -> list[dict[str, Any]]:
    return [
        {
            "candidate_id": f"pixiv:{index}",
            "platform": "pixiv",
            "work_id": str(index),
            "work_type": "illustration",
            "url": f"https://www.pixiv.net/artworks/{index}",
            "metadata": {"title": "t" * title_chars},
        }
        for index in range(count)
    ]


def _claimed_at_budget(rt: Runtime) -> tuple[str, Any]:
    status, body = admission.submit(
        rt, "acme", _task_of_job_size(rt, "fat-result", ADMITTED_JOB_BYTES), None
    )
    assert status == 202
    job_id = body["job"]["job_id"]
    record = execution.claim(rt, job_id, "worker-1")
    assert record is not None
    return job_id, record


def test_a_result_over_its_budget_keeps_its_best_candidates(rt: Runtime) -> None:
    """A job at its admission budget completes with a 200 KB result: the result is cut to what
    fits in 128 KiB (best candidates first, the rest named in `filtered`), never a stuck job."""
    job_id, record = _claimed_at_budget(rt)
    found = {"candidates": _candidates(100, 2_000), "scanned": 100, "filtered": []}
    assert result_size(found) > RESULT_BYTES
    assert execution.complete(rt, record, "worker-1", Outcome(result=found)) == "succeeded"
    job = jobs.get_job(rt, "acme", job_id, None)
    validate(job, "Job")
    kept = job["result"]["candidates"]
    assert 0 < len(kept) < 100
    assert kept == found["candidates"][: len(kept)]
    assert job["result"]["filtered"] == [
        {"work_id": str(index), "reason": "other"} for index in range(len(kept), 100)
    ]
    assert result_size(job["result"]) <= RESULT_BYTES
    assert largest_items(rt) <= MAX_ITEM_BYTES
    page = stream.events_page(rt, "acme", job_id, {}, None)
    assert page["events"][-1]["payload"]["result"] == job["result"]


def test_a_result_whose_best_candidate_cannot_fit_fails_the_job_cleanly(rt: Runtime) -> None:
    job_id, record = _claimed_at_budget(rt)
    found = {"candidates": _candidates(1, 200_000), "scanned": 1, "filtered": []}
    assert execution.complete(rt, record, "worker-1", Outcome(result=found)) == "failed"
    job = jobs.get_job(rt, "acme", job_id, None)
    assert job["error"]["code"] == "internal_error"
    assert "larger than" in job["error"]["message"]
    types = [event["type"] for event in stream.events_page(rt, "acme", job_id, {}, None)["events"]]
    assert types[-1] == "job.failed"


# -- item 4: event ids unique across jobs ----------------------------------------------------


def test_a_burst_of_jobs_in_one_millisecond_shares_no_event_id(
    crt: Runtime, api: Api, clock: Clock
) -> None:
    """Every job admitted, run or cancelled, and paged in the same millisecond: no two events
    share an id (pages and callbacks alike), and each id acks only its own job."""
    job_ids = [
        api.post(
            "/jobs",
            run_task(idempotency_key=f"burst-{index}", callback_url="https://hooks.example.test/"),
        ).body["job"]["job_id"]
        for index in range(12)
    ]
    for index, job_id in enumerate(job_ids):
        if index % 3 == 0:
            api.post(f"/jobs/{job_id}/cancel")
        else:
            assert execution.execute(crt, job_id) == "succeeded"
    pages = {job_id: api.get(f"/jobs/{job_id}/events").body["events"] for job_id in job_ids}
    assert {event["at"] for events in pages.values() for event in events} == {clock.now}
    ids = [event["event_id"] for events in pages.values() for event in events]
    # Cancelled while queued: accepted, cancelled; run: accepted, started, succeeded.
    expected = sum(2 if index % 3 == 0 else 3 for index in range(len(job_ids)))
    assert len(ids) == len(set(ids)) == expected
    intent_ids = [
        callback_event_id(callback)
        for job_id in job_ids
        for intent in callback_intents(crt, job_id)
        if (callback := crt.callbacks.get(IntentRef(job_id, int(intent["sk"][4:])))) is not None
    ]
    assert sorted(intent_ids) == sorted(ids)
    first, second = job_ids[:2]
    foreign = pages[second][-1]["event_id"]
    assert parse_event_id(foreign, first) is None
    response = api.post(f"/jobs/{first}/events/ack", {"ack_through": foreign})
    assert (response.body["acked"], response.body["unacked"]) == (0, len(pages[first]))
    own = pages[first][-1]["event_id"]
    response = api.post(f"/jobs/{first}/events/ack", {"ack_through": own})
    assert (response.body["acked"], response.body["unacked"]) == (len(pages[first]), 0)


# -- item 7: answers within Lambda's 6 MB ----------------------------------------------------


def test_job_pages_are_bounded_by_bytes_and_the_cursor_goes_on(api: Api, clock: Clock) -> None:
    """32 jobs with 200 KB of labels each: a page of 100 would be 6.5 MB; each page stops where
    the next job would not fit, and `next_cursor` resumes after its last job."""
    labels = {"l": "v" * 200_000}
    job_ids = []
    for index in range(32):
        clock.advance(1)
        task = canonical_task(idempotency_key=f"listed-{index}", labels=labels)
        job_ids.append(api.post("/jobs", task).body["job"]["job_id"])
    for query in ("limit=100", "limit=500&correlation_id=review-chain:135", "status=queued"):
        listed: list[str] = []
        cursor = ""
        pages = 0
        while True:
            target = f"/jobs?{query}{f'&cursor={cursor}' if cursor else ''}"
            page = get_within_lambda(api, target)
            validate(page, "JobPage")
            listed += [job["job_id"] for job in page["jobs"]]
            pages += 1
            cursor = page.get("next_cursor", "")
            if not cursor:
                break
        assert listed == list(reversed(job_ids))
        assert pages >= 2


def test_event_pages_are_bounded_by_bytes_and_next_after_goes_on(
    rt: Runtime, api: Api, clock: Clock
) -> None:
    """A job with 205 KB of labels and 53 events (each event shows the labels; the terminal
    one twice): 11 MB in one page. Pages stop where the next event would not fit, and both
    ways of reading on (next_after, and TelePost's own acked cursor) see every event once."""
    task = run_task(idempotency_key="chatty", labels=LABELS_205_KB, callback_url=None)
    job_id = api.post("/jobs", task).body["job"]["job_id"]
    record = execution.claim(rt, job_id, "worker-1")
    assert record is not None
    lease = execution.Lease(rt, record, "worker-1")
    for step in range(execution.MAX_PROGRESS_EVENTS):
        clock.advance(execution.PROGRESS_MIN_INTERVAL_MS)
        lease.progress("searching", f"step {step}")
    result = {"candidates": _candidates(1, 10), "scanned": 1, "filtered": []}
    assert execution.complete(rt, lease.record, "worker-1", Outcome(result=result)) == "succeeded"
    expected = [event.sequence for event in rt.store.events_after(job_id, 0, 200)[0]]
    assert len(expected) == 53

    seen: list[int | None] = []
    after = ""
    while True:
        target = f"/jobs/{job_id}/events{f'?after={after}' if after else ''}"
        page = get_within_lambda(api, target)
        validate(page, "EventPage")
        seen += [parse_event_id(event["event_id"], job_id) for event in page["events"]]
        after = page.get("next_after", "")
        if not after:
            break
    assert seen == expected

    acked: list[int | None] = []
    for _ in range(10):  # TelePost: unacked=1, ack through the newest event held, next tick
        page = api.get(f"/jobs/{job_id}/events?unacked=1").body
        if not page["events"]:
            break
        acked += [parse_event_id(event["event_id"], job_id) for event in page["events"]]
        api.post(f"/jobs/{job_id}/events/ack", {"ack_through": page["events"][-1]["event_id"]})
    assert acked == expected


def test_messages_are_clipped_to_what_the_job_keeps(rt: Runtime, clock: Clock) -> None:
    """A progress message or an error message of 300 KB (a source's text) is kept clipped, so
    the job item stays within its budget and the job still ends."""
    job_id, record = _claimed_at_budget(rt)
    lease = execution.Lease(rt, record, "worker-1")
    clock.advance(6_000)  # no progress event within 5 s of `job.started`
    lease.progress("s" * 500, "p" * 300_000)
    assert lease.record.progress_events == 1
    assert len((lease.record.progress_message or "").encode()) == MAX_PROGRESS_MESSAGE_BYTES
    failure = Outcome(reason=Reason.NETWORK_ERROR, message="m" * 300_000)
    assert execution.complete(rt, lease.record, "worker-1", failure) == "failed"
    job = jobs.get_job(rt, "acme", job_id, None)
    assert job["error"]["code"] == "source_error"
    assert len(job["error"]["message"]) == MAX_MESSAGE_CHARS
    assert largest_items(rt) <= MAX_ITEM_BYTES


def test_a_callback_whose_job_is_gone_is_dead_lettered(crt: Runtime) -> None:
    """The body is rebuilt from the job: with the job gone (past its retention) there is
    nothing to send, and the intent is dead-lettered with the reason, never retried."""
    status, body = admission.submit(
        crt, "acme", run_task(callback_url="https://hooks.example.test/"), None
    )
    assert status == 202
    job_id = body["job"]["job_id"]
    crt.store.client.delete_item(
        TableName=crt.store.table_name, Key={"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "#JOB"}}
    )
    assert callbacks.deliver(crt, IntentRef(job_id, 1)).outcome == "dead"
    (dead,) = list_dead(crt)
    assert (dead["job_id"], dead["last_error"]) == (job_id, "the job no longer exists")
