"""One guard at a time (design §3): tests that leave a single condition between the code and a
broken invariant.

Most invariants are kept by layered conditions; a history that breaks one layer is usually
stopped by another, so removing one guard alone fails no end-to-end test. Each test here builds
the situation in which only the guard it names stands in the way: it drives the store directly,
or lands a competing write between a service's read and its conditional write. docs/invariants.md
lists which mutation each test catches.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jobstream.delivery.http import HttpResult
from jobstream.domain import IntentRef
from jobstream.jobtypes.runner import Outcome
from jobstream.lifecycle import log
from jobstream.lifecycle.retention import expiry_of, item_expiry
from jobstream.protocol.errors import Reason
from jobstream.protocol.events import TERMINAL_KINDS, EventKind, event_id
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks, execution, jobs
from jobstream.service import events as stream
from jobstream.service.liveness import expire
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.jobs import Append, StaleJobError
from tests.conftest import REFERENCE_TARGETS
from tests.integration.test_conformance_jobs import FOUR_TARGETS
from tests.support.dispatch import dispatch_stream
from tests.support.event_ids import parse_event_id
from tests.support.harness import Api, Clock, canonical_task
from tests.support.queues import SentCallbacks
from tests.support.state import mark_running, set_job_attributes, whole_table
from tests.support.validation import validate_error


def admit(rt: Runtime, key: str = "guard-key", *, callback: bool = False) -> str:
    task = canonical_task(idempotency_key=key)
    if not callback:
        task["callback_url"] = None
    status, body = admission.submit(rt, "acme", task, None)
    assert status == 202
    job_id: str = body["job"]["job_id"]
    return job_id


def kinds(rt: Runtime, job_id: str) -> list[str]:
    events, _ = rt.store.events_after(job_id, 0, 100)
    return [event.kind for event in events]


def ids(rt: Runtime, job_id: str) -> list[str]:
    events, _ = rt.store.events_after(job_id, 0, 100)
    return [event_id(job_id, event.at, event.sequence) for event in events]


def before_first_call(
    monkeypatch: pytest.MonkeyPatch, target: object, name: str, interloper: Callable[[], object]
) -> None:
    """Run `interloper` once, just before the first call of `target.name` goes out: a competing
    write that lands between the caller's read and its conditional write."""
    original = getattr(target, name)
    pending = [interloper]

    def call(*args: Any, **kwargs: Any) -> Any:
        while pending:
            pending.pop()()
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, call)


# -- I2 / I1: at most one event of each lifecycle kind, whatever the caller believes ---------


@pytest.mark.parametrize("kind", [EventKind.REQUESTED, EventKind.OUTCOME_CANCELLED])
def test_the_store_refuses_a_lifecycle_kind_already_recorded(rt: Runtime, kind: EventKind) -> None:
    """`NOT contains(recorded_kinds, :kind)` alone: the record is current (the event-count check
    passes, the next event slot is free), yet the kind is already in the stream."""
    job_id = admit(rt)
    if kind is EventKind.OUTCOME_CANCELLED:
        jobs.cancel(rt, "acme", job_id, None)
    current = rt.store.get_job(job_id)
    assert current is not None
    assert kind.value in current.recorded_kinds
    before = kinds(rt, job_id)
    event = log.next_event(current, kind, current.last_event_at)
    # A terminal event must carry the job's expiry (lifecycle/retention.py).
    expiry = expiry_of(event.at, rt.settings) if kind in TERMINAL_KINDS else None
    with pytest.raises(StaleJobError):
        rt.store.append_event(
            current,
            Append(
                event,
                expires_at=item_expiry(current, rt.settings),
                job_expires_at=expiry,
                once_per_job=True,
            ),
        )
    assert kinds(rt, job_id) == before


# -- I1 / I6: a state move only from the states it leaves --------------------------------------


def test_cancel_loses_to_a_status_change_after_its_read(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job fails between cancel's read and its write, by a write the event count does not
    see: only `require_status` stops a second terminal outcome (cancelled after failed)."""
    job_id = admit(rt)
    failed_at = clock.advance(1_000)
    before_first_call(
        monkeypatch,
        rt.store,
        "append_event",
        lambda: set_job_attributes(
            rt, job_id, status="failed", reason="no_candidate", updated_at=failed_at
        ),
    )
    document = jobs.cancel(rt, "acme", job_id, None)
    assert document["status"] == "failed"
    assert kinds(rt, job_id) == ["job.requested", "job.outcome_failed"]


def test_claim_loses_to_a_status_change_after_its_read(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled between the claim's read and its write: only `require_status` (queued) keeps
    the cancelled job from starting."""
    job_id = admit(rt)
    at = clock.advance(1_000)
    before_first_call(
        monkeypatch,
        rt.store,
        "append_event",
        lambda: set_job_attributes(
            rt, job_id, status="cancelled", reason="cancelled_by_consumer", updated_at=at
        ),
    )
    assert execution.claim(rt, job_id, "worker-a") is None
    record = rt.store.get_job(job_id)
    assert record is not None
    assert (record.status, record.lease_owner, record.started_at) == ("cancelled", None, None)
    assert EventKind.EXECUTION_STARTED.value not in kinds(rt, job_id)


def test_a_verdict_loses_to_a_claim_after_its_read(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep judged the job queued too long; a worker claims it before the verdict is
    written: only `require_status` (the status judged) keeps the verdict off the running job."""
    job_id = admit(rt)
    now = clock.advance(rt.settings.queued_timeout_ms)
    judged = rt.store.get_job(job_id)
    assert judged is not None
    before_first_call(
        monkeypatch,
        rt.store,
        "append_event",
        lambda: mark_running(rt, job_id, at=now, lease_until=now + rt.settings.lease_ms),
    )
    assert expire(rt, judged, Reason.QUEUED_TOO_LONG, now) is None
    record = rt.store.get_job(job_id)
    assert record is not None
    assert (record.status, record.lease_owner) == ("running", "worker-1")
    assert kinds(rt, job_id) == ["job.requested"]


def test_only_the_lease_holder_completes_a_running_job(rt: Runtime) -> None:
    """Another worker completing from a current read: only `lease_owner = :owner` stands
    (the status is running and the event count matches)."""
    job_id = admit(rt)
    assert execution.claim(rt, job_id, "worker-a") is not None
    current = rt.store.get_job(job_id)
    assert current is not None
    outcome = Outcome(result={"candidates": [], "scanned": 0})
    assert execution.complete(rt, current, "worker-b", outcome) == "lost"
    record = rt.store.get_job(job_id)
    assert record is not None
    assert (record.status, record.lease_owner) == ("running", "worker-a")
    assert kinds(rt, job_id) == ["job.requested", "job.execution_started"]


# -- I2 / I3: an event slot is written once ------------------------------------------------------


def test_an_event_slot_taken_after_the_read_is_not_overwritten(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A progress event takes the next slot between cancel's read and its write. The event-count
    condition and the event item's `attribute_not_exists` each refuse the cancel (either one
    alone suffices; without both, the cancel overwrites the progress event and its id)."""
    job_id = admit(rt)
    claimed = execution.claim(rt, job_id, "worker-a")
    assert claimed is not None
    lease = execution.Lease(rt, claimed, "worker-a")  # not entered: no heartbeat thread

    def progress() -> None:
        clock.advance(execution.PROGRESS_MIN_INTERVAL_MS)
        lease.progress("ranking")

    before_first_call(monkeypatch, rt.store, "append_event", progress)
    assert jobs.cancel(rt, "acme", job_id, None)["status"] == "cancelled"
    assert kinds(rt, job_id) == [
        "job.requested",
        "job.execution_started",
        "job.progressed",
        "job.outcome_cancelled",
    ]


def test_the_stream_stays_in_order_past_nine_events(rt: Runtime, clock: Clock) -> None:
    """Event sort keys are zero-padded: the tenth event sorts after the ninth, not after the
    first, in pages and in `after` cursors."""
    job_id = admit(rt)
    claimed = execution.claim(rt, job_id, "worker-a")
    assert claimed is not None
    lease = execution.Lease(rt, claimed, "worker-a")
    for step in range(10):
        clock.advance(execution.PROGRESS_MIN_INTERVAL_MS)
        lease.progress("searching", f"step {step}")
    page = stream.events_page(rt, "acme", job_id, {}, None)
    sequences = [parse_event_id(event["event_id"], job_id) for event in page["events"]]
    assert sequences == list(range(1, 13))
    all_ids = [event["event_id"] for event in page["events"]]
    after = stream.events_page(rt, "acme", job_id, {"after": [all_ids[8]]}, None)
    assert [event["event_id"] for event in after["events"]] == all_ids[9:]


# -- I4: the cursor never moves back ------------------------------------------------------------


def test_an_ack_that_lost_a_race_does_not_move_the_cursor_back(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ack of event 1 read the cursor at 0; an ack of event 2 lands before its write. The
    service's own check saw 0 < 1: only the store's forward-only condition refuses."""
    job_id = admit(rt)
    clock.advance(1_000)
    jobs.cancel(rt, "acme", job_id, None)
    first, second = ids(rt, job_id)
    store = rt.store
    before_first_call(
        monkeypatch,
        store,
        "advance_ack",
        lambda: stream.acknowledge(rt, "acme", job_id, {"ack_through": second}, None),
    )
    result = stream.acknowledge(rt, "acme", job_id, {"ack_through": first}, None)
    assert (result["acked"], result["unacked"]) == (2, 0)
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.ack_sequence == 2


# -- I5: one delivery attempt at a time ---------------------------------------------------------


def test_a_duplicate_message_during_an_attempt_does_not_post_again(
    crt: Runtime, clock: Clock
) -> None:
    """A duplicate message arrives while a claimed attempt (its message late: past the window
    of a first attempt without a claim) is still posting: the claim condition (an in-flight
    intent is taken only after its lease) is all that stops a second POST and a second charge
    to the 8-attempt budget."""
    job_id = admit(crt, callback=True)
    ref = IntentRef(job_id, 1)
    clock.advance(
        keys.HANDOFF_GRACE_MS - crt.settings.callback_timeout_ms - callbacks.LEASE_MARGIN_MS
    )
    posts: list[str] = []
    nested: list[str] = []

    def post(target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float) -> HttpResult:
        posts.append(headers["X-Idempotency-Key"])
        if len(posts) == 1:
            nested.append(callbacks.deliver(runtime, ref).outcome)
        return HttpResult(status=204, body_excerpt="", retry_after=None)

    runtime = replace(crt, poster=post)
    assert callbacks.deliver(runtime, ref).outcome == "delivered"
    assert nested == ["held"]
    assert len(posts) == 1
    record = crt.callbacks.get(ref)
    assert record is not None
    assert (record.state, record.attempts) == ("delivered", 1)


def test_a_duplicate_during_a_first_attempt_without_a_claim_records_once(crt: Runtime) -> None:
    """A duplicate message arrives while a first attempt, which took the callback without a
    claim, is still posting: the duplicate POSTs too (at least once) and records the outcome;
    the outcome's condition (still pending with no attempt) alone stops the first attempt from
    recording it again, counting the attempt twice or dead-lettering a delivered callback."""
    job_id = admit(crt, callback=True)
    ref = IntentRef(job_id, 1)
    posts: list[str] = []
    nested: list[str] = []

    def post(target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float) -> HttpResult:
        posts.append(headers["X-Idempotency-Key"])
        if len(posts) == 1:
            nested.append(callbacks.deliver(replace(runtime, poster=delivered), ref).outcome)
        return HttpResult(status=404, body_excerpt="", retry_after=None)

    def delivered(
        target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResult:
        posts.append(headers["X-Idempotency-Key"])
        return HttpResult(status=204, body_excerpt="", retry_after=None)

    runtime = replace(crt, poster=post)
    assert callbacks.deliver(runtime, ref).outcome == "settled"
    assert nested == ["delivered"]
    assert len(posts) == 2
    record = crt.callbacks.get(ref)
    assert record is not None
    assert (record.state, record.attempts, record.last_status) == ("delivered", 1, 204)


# -- I5 / I10: an attempt that died in flight is sent again ---------------------------------------


def test_the_sweep_resends_an_attempt_that_died_in_flight(rt: Runtime, clock: Clock) -> None:
    """A delivery claimed the callback, then its invocation died and took the message with it:
    the queue holds nothing. Only the callback's place in the sweep index (a claim does not
    move it) and the reclaim of an expired attempt bring the callback back."""
    queue = SentCallbacks()

    def post(target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float) -> HttpResult:
        return HttpResult(status=204, body_excerpt="", retry_after=None)

    runtime = replace(rt, queue=queue, poster=post)  # type: ignore[arg-type]
    job_id = admit(runtime, callback=True)
    ref = IntentRef(job_id, 1)
    dispatch_stream(runtime)
    assert queue.sent == [ref]
    lease_ms = 30_000
    assert runtime.callbacks.claim(ref, now=clock.now, lease_ms=lease_ms) is not None
    queue.sent.clear()
    clock.advance(lease_ms + keys.HANDOFF_GRACE_MS + 1)
    assert sweep(runtime).callbacks_resent == 1
    assert queue.sent == [ref]
    assert callbacks.deliver(runtime, ref).outcome == "delivered"
    record = runtime.callbacks.get(ref)
    assert record is not None
    assert (record.state, record.attempts) == ("delivered", 2)


def test_the_sweep_leaves_a_live_attempt_alone(rt: Runtime, clock: Clock) -> None:
    """A claim does not move the callback (its open job covers it: it has no index entry of
    its own): a slow attempt still under its lease is not sent again (its duplicate would only
    be refused), and is once its lease has lapsed."""
    queue = SentCallbacks()
    runtime = replace(rt, queue=queue)  # type: ignore[arg-type]
    job_id = admit(runtime, callback=True)
    ref = IntentRef(job_id, 1)
    clock.advance(keys.HANDOFF_GRACE_MS + 1)  # due now
    lease_ms = 10 * keys.HANDOFF_GRACE_MS
    claimed = runtime.callbacks.claim(ref, now=clock.now, lease_ms=lease_ms)
    assert claimed is not None
    assert not claimed.indexed
    assert list(runtime.callbacks.due(now=clock.now)) == []
    assert sweep(runtime).callbacks_resent == 0
    assert queue.sent == []
    clock.advance(lease_ms + 1)
    assert sweep(runtime).callbacks_resent == 1
    assert queue.sent == [ref]


# -- I10: a lost dispatch is sent again -------------------------------------------------------


class SentJobs:
    """The work queue, reduced to what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, jobs: Sequence[JobDispatch]) -> int:
        self.sent.extend(job.job_id for job in jobs)
        return len(jobs)


def test_the_sweep_sends_a_queued_job_again_after_the_grace_period(
    rt: Runtime, clock: Clock
) -> None:
    """The dispatch after admission was lost: the sweep's re-send is the only one that follows
    (counted by the queue itself, not by the sweep's report)."""
    queue = SentJobs()
    runtime = replace(rt, work=queue)  # type: ignore[arg-type]
    job_id = admit(runtime)
    dispatch_stream(runtime)
    assert queue.sent == [job_id]
    queue.sent.clear()
    clock.advance(keys.HANDOFF_GRACE_MS)
    sweep(runtime)
    assert queue.sent == [job_id]


# -- I6 / I9: replays after a configuration change, and refusals that write nothing -----------


def _write_targets(path: Path, targets: Mapping[str, Any], mtime: int) -> None:
    path.write_text(json.dumps(targets), encoding="utf-8")
    os.utime(path, (mtime, mtime))  # the runtime re-reads the file when its mtime changes


def test_a_key_replayed_after_its_target_changed_conflicts(
    rt: Runtime, api: Api, targets_path: Path
) -> None:
    """The target comparison of the replay check alone: the params are the same, but the
    operator has since re-pointed them at another target; the key keeps its first job."""
    admitted = api.post("/jobs", canonical_task())
    assert admitted.status == 202
    renamed = json.loads(json.dumps(REFERENCE_TARGETS))
    renamed["targets"][0]["id"] = "bot1-illust-renamed"
    _write_targets(targets_path, renamed, 5)
    before = whole_table(rt)
    replay = api.post("/jobs", canonical_task())
    assert replay.status == 409
    validate_error(replay.body)
    assert replay.body["error"]["code"] == "idempotency_conflict"
    assert replay.body["error"]["detail"]["job_id"] == admitted.body["job"]["job_id"]
    assert whole_table(rt) == before


REFUSED_TASKS: list[tuple[str, dict[str, Any], int]] = [
    ("unknown target", {"params": {"target_id": "nope"}}, 404),
    (
        "ambiguous target",
        {"params": {"source": {"platform": "pixiv"}, "query": {"tags": ["x"]}}},
        409,
    ),
    ("bad selector", {"params": {"target_id": 42}}, 400),
    ("bad params", {"params": {"query": {"tags": []}}}, 400),
    ("unknown job type", {"job_type": "video_upload"}, 400),
    ("protocol version", {"protocol_version": "2"}, 400),
    ("refused callback", {"callback_url": "http://127.0.0.1:9/hook"}, 400),
    ("bad deadline", {"deadline_ms": -1}, 400),
]


@pytest.mark.parametrize(
    ("overrides", "status"),
    [pytest.param(overrides, status, id=name) for name, overrides, status in REFUSED_TASKS],
)
def test_a_refused_task_writes_nothing_anywhere_in_the_table(
    rt: Runtime, api: Api, targets_path: Path, overrides: dict[str, Any], status: int
) -> None:
    """I9 over the whole table (not only the tenant's listing), with several targets."""
    _write_targets(targets_path, FOUR_TARGETS, 6)
    admitted = canonical_task(
        idempotency_key="admitted-key", callback_url=None, params={"target_id": "bot1-illust-a"}
    )
    assert api.post("/jobs", admitted).status == 202
    task = canonical_task(idempotency_key="refused-key", **overrides)
    before = whole_table(rt)
    response = api.post("/jobs", task)
    assert response.status == status, response.body
    validate_error(response.body)
    assert whole_table(rt) == before


class _ThrottledBatchReads:
    """A DynamoDB client whose BatchGetItem leaves keys unprocessed `times` times: all of them,
    or (`partial`) all but the first, which it answers."""

    def __init__(self, client: Any, times: int, *, partial: bool = False) -> None:
        self._client = client
        self.left = times
        self.partial = partial
        self.get_items = 0

    def batch_get_item(self, **request: Any) -> dict[str, Any]:
        if self.left <= 0:
            answer: dict[str, Any] = self._client.batch_get_item(**request)
            return answer
        self.left -= 1
        ((table, asked),) = request["RequestItems"].items()
        keys_asked = asked["Keys"]
        if not self.partial or len(keys_asked) < 2:
            return {"Responses": {}, "UnprocessedKeys": request["RequestItems"]}
        first = self._client.batch_get_item(RequestItems={table: {**asked, "Keys": keys_asked[:1]}})
        return {
            "Responses": first["Responses"],
            "UnprocessedKeys": {table: {**asked, "Keys": keys_asked[1:]}},
        }

    def get_item(self, **request: Any) -> dict[str, Any]:
        self.get_items += 1
        answer: dict[str, Any] = self._client.get_item(**request)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize(
    ("throttled", "partial"), [(0, False), (2, False), (5, False), (1, True), (5, True)]
)
def test_an_ack_reads_the_job_and_its_event_even_when_throttled(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch, throttled: int, partial: bool
) -> None:
    """The ack's one read of the job, its cursor and the named event: unprocessed keys are
    asked for again, and read one by one if the batch keeps refusing them; the ack still
    moves."""
    job_id = admit(rt)
    clock.advance(1_000)
    jobs.cancel(rt, "acme", job_id, None)
    first, second = ids(rt, job_id)
    client = _ThrottledBatchReads(rt.store.client, throttled, partial=partial)
    monkeypatch.setattr(rt.store, "client_factory", lambda: client)
    record, at = rt.store.get_job_and_event_at(job_id, 2)
    assert record is not None
    assert record.job_id == job_id
    assert at is not None
    assert second == event_id(job_id, at, 2)
    # Past three refusals, what is left is read one item at a time.
    assert client.get_items == (0 if throttled < 3 else 1 if partial else 3)
    client.left = throttled
    result = stream.acknowledge(rt, "acme", job_id, {"ack_through": second}, None)
    assert (result["acked"], result["unacked"]) == (2, 0)
    assert rt.store.get_job_and_event_at(job_id, 9) == (rt.store.get_job(job_id), None)
    assert first != second
