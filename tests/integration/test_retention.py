"""Retention (issue 13 item 9, issue 14): a finished job and every item of it carry `expires_at`
(epoch seconds, DynamoDB TTL), none before its job; an open job's items never expire before it;
an open callback never expires; an expired key admits a new job that never reads the old one's
items as its own.

Every item but the job item takes its expiry when it is written (lifecycle/retention.py); the job
item takes its own with its terminal event. Items are read raw from the table
(tests/support/state.py: whole_table), as TTL sees them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from jobstream.delivery.http import HttpResult
from jobstream.domain import IntentRef
from jobstream.lifecycle import log
from jobstream.lifecycle.retention import (
    SECONDS_PER_DAY,
    SWEEP_SLACK_MS,
    callback_span_ms,
    expiry_of,
    item_expiry,
)
from jobstream.protocol.errors import Reason
from jobstream.protocol.events import EventKind
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks, endpoints, execution, jobs
from jobstream.service import events as stream
from jobstream.service.dead_letters import redrive
from jobstream.service.liveness import expire
from jobstream.store import keys
from jobstream.store.jobs import NewEvent
from jobstream.store.ports import MAX_CALLBACK_ATTEMPTS
from tests.support.harness import Clock, canonical_task
from tests.support.state import mark_failed, whole_table

HOOK = "https://consumer.example.test/hooks"


class Receiver:
    """The consumer's callback endpoint: answers `status`, which a test may change."""

    def __init__(self) -> None:
        self.status = 204
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, _target: Any, body: bytes, _headers: Any, _timeout: float) -> HttpResult:
        self.bodies.append(json.loads(body))
        return HttpResult(self.status, "", None)


@pytest.fixture
def receiver() -> Receiver:
    return Receiver()


@pytest.fixture
def hrt(rt: Runtime, receiver: Receiver) -> Runtime:
    """The runtime with a callback receiver (deliveries are driven by the test, not a queue)."""
    return replace(rt, poster=receiver)


def submit(rt: Runtime, key: str = "keep-key", tags: str = "botefuku", **overrides: Any) -> str:
    task = canonical_task(idempotency_key=key, callback_url=HOOK, **overrides)
    task["params"] = {"query": {"tags": [tags]}}
    status, body = admission.submit(rt, "acme", task, None)
    assert status == 202, body
    job_id: str = body["job"]["job_id"]
    return job_id


def items_of(rt: Runtime, job_id: str) -> dict[str, dict[str, Any]]:
    """Every item of the job's partition, by sort key, as DynamoDB stores it."""
    return {sk: item for (pk, sk), item in whole_table(rt).items() if pk == keys.job_pk(job_id)}


def expiry(item: dict[str, Any]) -> int | None:
    value = item.get(keys.TTL_ATTRIBUTE)
    return int(value["N"]) if value is not None else None


def deliver_all(rt: Runtime, job_id: str) -> None:
    record = rt.store.get_job(job_id)
    assert record is not None
    for sequence in range(1, record.event_count + 1):
        callbacks.deliver(rt, IntentRef(job_id, sequence))


def ack_all(rt: Runtime, job_id: str) -> None:
    page = stream.events_page(rt, "acme", job_id, {}, None)
    stream.acknowledge(rt, "acme", job_id, {"ack_through": page["events"][-1]["event_id"]}, None)


def with_a_dead_callback(rt: Runtime, receiver: Receiver) -> str:
    """A job whose first callback died (the receiver answered 404)."""
    job_id = submit(rt)
    receiver.status = 404
    assert callbacks.deliver(rt, IntentRef(job_id, 1)).outcome == "dead"
    receiver.status = 204
    return job_id


# -- how a job finishes: every path that writes a terminal event --------------------------------


def run_to_success(rt: Runtime, job_id: str, _clock: Clock) -> None:
    assert execution.execute(rt, job_id) == "succeeded"


def cancel(rt: Runtime, job_id: str, _clock: Clock) -> None:
    jobs.cancel(rt, "acme", job_id, None)


def deadline_verdict(rt: Runtime, job_id: str, clock: Clock) -> None:
    record = rt.store.get_job(job_id)
    assert record is not None
    assert expire(rt, record, Reason.EXECUTION_TIMEOUT, clock.advance(1)) is not None


def repaired_on_read(rt: Runtime, job_id: str, clock: Clock) -> None:
    # The state says failed, the stream lacks the event: reading the stream records it.
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    stream.events_page(rt, "acme", job_id, {}, None)


FINISHES: list[Callable[[Runtime, str, Clock], None]] = [
    run_to_success,
    cancel,
    deadline_verdict,
    repaired_on_read,
]


@pytest.mark.parametrize("finish", FINISHES, ids=lambda f: f.__name__)
def test_a_finished_jobs_items_all_expire_and_none_before_it(
    hrt: Runtime, clock: Clock, finish: Callable[[Runtime, str, Clock], None]
) -> None:
    job_id = submit(hrt)
    deliver_all(hrt, job_id)  # the accepted event's callback: closed before the job ends
    finish(hrt, job_id, clock)
    deliver_all(hrt, job_id)  # the terminal event's callback: closes after the job ended
    ack_all(hrt, job_id)
    record = hrt.store.get_job(job_id)
    assert record is not None
    assert record.is_terminal
    assert record.event_count >= 2
    assert record.expires_at == -(-record.last_event_at // 1000) + 30 * SECONDS_PER_DAY
    found = items_of(hrt, job_id)
    assert expiry(found.pop(keys.JOB_SK)) == record.expires_at
    assert keys.ACK_SK in found
    assert (keys.RESULT_SK in found) == (record.status == "succeeded")
    assert sum(sk.startswith(keys.EVENT_PREFIX) for sk in found) == record.event_count
    # Every other item: the expiry it took when it was written, from the job's deadline.
    for sk, item in found.items():
        assert expiry(item) == item_expiry(record, hrt.settings), sk
        assert item_expiry(record, hrt.settings) >= record.expires_at


def test_the_expiry_is_in_seconds_and_follows_the_setting(rt: Runtime) -> None:
    settings = rt.settings.model_copy(update={"retention_days": 7})
    assert expiry_of(1_790_481_174_001, settings) == 1_790_481_175 + 7 * 86_400
    assert expiry_of(1_790_481_174_000, settings) == 1_790_481_174 + 7 * 86_400


def test_an_open_jobs_items_never_expire_before_it(hrt: Runtime, clock: Clock) -> None:
    """An open job item carries no expiry; its other items expire only after the latest time
    its job can finish (the deadline, with the sweep's slack) plus the retention period, however
    short its callbacks' retries."""
    hrt = replace(
        hrt,
        settings=hrt.settings.model_copy(
            update={"callback_retry_base_ms": 1_000, "callback_retry_max_ms": 1_000}
        ),
    )
    job_id = submit(hrt)
    deliver_all(hrt, job_id)
    record = execution.claim(hrt, job_id, "worker-1")
    assert record is not None
    with execution.Lease(hrt, record, "worker-1") as lease:
        clock.advance(10_000)
        lease.progress("scanning", "1 of 3")
        deliver_all(hrt, job_id)
    ack_all(hrt, job_id)
    found = items_of(hrt, job_id)
    assert sorted(found) == [keys.ACK_SK, keys.JOB_SK, *(keys.event_sk(n) for n in (1, 2, 3))]
    assert expiry(found.pop(keys.JOB_SK)) is None
    open_job = hrt.store.get_job(job_id)
    assert open_job is not None
    assert open_job.deadline_at is not None
    latest_finish = open_job.deadline_at + SWEEP_SLACK_MS
    for sk, item in found.items():
        expires_at = expiry(item)
        assert expires_at is not None, sk
        assert expires_at >= expiry_of(latest_finish, hrt.settings), sk


def test_a_job_finished_late_expires_with_its_items(hrt: Runtime, clock: Clock) -> None:
    """A job cancelled long past its deadline (the sweep was down for days) is kept no longer
    than its items: never a job whose events have expired."""
    job_id = submit(hrt)
    record = hrt.store.get_job(job_id)
    assert record is not None
    assert record.deadline_at is not None
    clock.now = record.deadline_at + 5 * SWEEP_SLACK_MS
    jobs.cancel(hrt, "acme", job_id, None)
    cancelled = hrt.store.get_job(job_id)
    assert cancelled is not None
    assert cancelled.status == "cancelled"
    assert cancelled.expires_at == item_expiry(record, hrt.settings)
    assert cancelled.expires_at < expiry_of(clock.now, hrt.settings)
    assert all(
        (expiry(item) or 0) >= cancelled.expires_at for item in items_of(hrt, job_id).values()
    )


def test_an_open_callback_never_expires_before_its_retries_end(
    hrt: Runtime, clock: Clock, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The latest callback a job can have (its terminal event at the deadline verdict, a day
    late) failing every attempt at the longest backoff: open until it dies, and its item's
    expiry still ahead then, even with the shortest retention."""
    rt = replace(
        hrt,
        settings=hrt.settings.model_copy(
            update={"retention_days": 1, "callback_retry_base_ms": 21_600_000}
        ),
    )
    job_id = submit(rt)
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.deadline_at is not None
    clock.now = record.deadline_at + SWEEP_SLACK_MS
    ended = expire(rt, record, Reason.EXECUTION_TIMEOUT, clock.now)
    assert ended is not None
    ref = IntentRef(job_id, ended.event_count)
    receiver.status = 503
    # This callback alone fails (its endpoint's others are delivered): the endpoint is never
    # paused, and the callback spends its whole budget.
    monkeypatch.setattr(endpoints, "PAUSE_AFTER_FAILURES", MAX_CALLBACK_ATTEMPTS + 1)
    for attempt in range(1, 9):
        intent = rt.callbacks.get(ref)
        assert intent is not None
        assert intent.expires_at is not None
        assert intent.expires_at * 1000 > clock.now + callback_span_ms(rt.settings) // 8
        clock.now = max(clock.now, intent.next_attempt_at) + rt.settings.callback_timeout_ms
        outcome = callbacks.deliver(rt, ref).outcome
        assert outcome == ("dead" if attempt == 8 else "retry")
    dead = rt.callbacks.get(ref)
    assert dead is not None
    assert dead.state == "dead"
    assert dead.expires_at is not None
    assert dead.expires_at * 1000 > clock.now
    # The job item itself may expire first (retention shorter than the retries): never its
    # callback while it is open.
    assert item_expiry(record, rt.settings) * 1000 >= clock.now


def test_a_redriven_dead_callback_loses_its_expiry_until_it_closes_again(
    hrt: Runtime, clock: Clock, receiver: Receiver
) -> None:
    job_id = with_a_dead_callback(hrt, receiver)
    jobs.cancel(hrt, "acme", job_id, None)
    deliver_all(hrt, job_id)
    dead = hrt.callbacks.get(IntentRef(job_id, 1))
    assert dead is not None
    assert dead.expires_at is not None
    revived = hrt.callbacks.revive(dead, now=clock.advance(1_000))
    assert revived is not None
    assert (revived.state, revived.expires_at, revived.retain_until) == (
        "pending",
        None,
        dead.expires_at,
    )
    # A revived callback that dies again is revived again with the expiry it kept.
    receiver.status = 404
    assert callbacks.deliver(hrt, IntentRef(job_id, 1)).outcome == "dead"
    again = hrt.callbacks.get(IntentRef(job_id, 1))
    assert again is not None
    assert again.expires_at == dead.expires_at
    assert hrt.callbacks.revive(again, now=clock.advance(1_000)) is not None
    receiver.status = 204
    assert callbacks.deliver(hrt, IntentRef(job_id, 1)).outcome == "delivered"
    delivered = hrt.callbacks.get(IntentRef(job_id, 1))
    assert delivered is not None
    assert delivered.expires_at == dead.expires_at


def test_the_dead_letters_of_an_expired_job_are_not_redriven(
    hrt: Runtime, clock: Clock, receiver: Receiver
) -> None:
    job_id = with_a_dead_callback(hrt, receiver)
    jobs.cancel(hrt, "acme", job_id, None)
    record = hrt.store.get_job(job_id)
    assert record is not None
    assert record.expires_at is not None
    clock.now = record.expires_at * 1000
    assert redrive(hrt, job_id=job_id).revived == 0
    assert hrt.callbacks.get(IntentRef(job_id, 1)).state == "dead"  # type: ignore[union-attr]
    clock.now -= 1_000
    assert redrive(hrt, job_id=job_id).revived == 1


def finished_and_acked(rt: Runtime, clock: Clock, receiver: Receiver) -> tuple[str, int]:
    """A job run to success, its first callback dead, the rest retrying, its stream acked to
    the end; and the time its key is free again. Its last event id is kept in OLD_IDS."""
    job_id = submit(rt)
    receiver.status = 404
    assert callbacks.deliver(rt, IntentRef(job_id, 1)).outcome == "dead"
    receiver.status = 503
    assert execution.execute(rt, job_id) == "succeeded"
    deliver_all(rt, job_id)
    receiver.status = 204
    ack_all(rt, job_id)
    old = rt.store.get_job(job_id)
    assert old is not None
    assert old.expires_at is not None
    assert old.event_count >= 3
    OLD_IDS[job_id] = stream.events_page(rt, "acme", job_id, {}, None)["events"][-1]["event_id"]
    return job_id, old.expires_at * 1000


OLD_IDS: dict[str, str] = {}


def reuse_key(rt: Runtime) -> str:
    task = canonical_task(idempotency_key="keep-key", callback_url=HOOK)
    task["params"] = {"query": {"tags": ["botefuku"]}}
    status, body = admission.submit(rt, "acme", task, None)
    assert status == 202, body
    job_id: str = body["job"]["job_id"]
    return job_id


def assert_a_fresh_job(rt: Runtime, job_id: str, receiver: Receiver) -> None:
    """The new job shows nothing of the old one, runs, and calls back its own events only."""
    fresh = rt.store.get_job(job_id)
    assert fresh is not None
    assert (fresh.status, fresh.event_count, fresh.expires_at, fresh.ack_sequence) == (
        "queued",
        1,
        None,
        0,
    )
    assert fresh.result is None
    page = stream.events_page(rt, "acme", job_id, {"unacked": ["1"]}, None)
    assert [event["type"] for event in page["events"]] == ["job.accepted"]
    assert page["unacked"] == 1
    # The old job's last event id (the same job id) names no event of the new one.
    ack = stream.acknowledge(rt, "acme", job_id, {"ack_through": OLD_IDS[job_id]}, None)
    assert (ack["acked"], ack["unacked"]) == (0, 1)
    ack = stream.acknowledge(
        rt, "acme", job_id, {"ack_through": page["events"][0]["event_id"]}, None
    )
    assert (ack["acked"], ack["unacked"]) == (1, 0)
    # Callbacks of the old job under the same key are not sent for the new one.
    receiver.bodies.clear()
    for sequence in range(2, 6):
        callbacks.deliver(rt, IntentRef(job_id, sequence))
    assert receiver.bodies == []
    assert redrive(rt, job_id=job_id).revived == 0
    # The new job runs: its events take the old ones' places.
    assert execution.execute(rt, job_id) == "succeeded"
    deliver_all(rt, job_id)
    done = rt.store.get_job(job_id)
    assert done is not None
    assert [body["job_id"] for body in receiver.bodies] == [job_id] * done.event_count
    assert all(body["at"] >= fresh.created_at for body in receiver.bodies)
    page = stream.events_page(rt, "acme", job_id, {}, None)
    types = [event["type"] for event in page["events"] if event["type"] != "job.progress"]
    assert types == ["job.accepted", "job.started", "job.succeeded"]
    assert page["events"][-1]["payload"]["result"]["candidates"]


def test_a_key_reused_after_its_job_expired_admits_a_new_job(
    hrt: Runtime, clock: Clock, receiver: Receiver
) -> None:
    """The retention period is also the idempotency window (docs/protocol.md)."""
    first, free_at = finished_and_acked(hrt, clock, receiver)
    # Within the window the key names the finished job (other params: a conflict).
    task = canonical_task(idempotency_key="keep-key", callback_url=HOOK)
    task["params"] = {"query": {"tags": ["other"]}}
    with pytest.raises(Exception, match="different params"):
        admission.submit(hrt, "acme", task, None)
    # Past it, TTL has deleted nothing yet: the key admits a new job all the same.
    clock.now = free_at
    assert reuse_key(hrt) == first  # the id is derived from the key
    assert_a_fresh_job(hrt, first, receiver)


def test_a_key_whose_job_item_ttl_deleted_admits_a_new_job(
    hrt: Runtime, clock: Clock, receiver: Receiver
) -> None:
    """TTL deletes item by item, in no order: the job item may go first, its events later."""
    first, free_at = finished_and_acked(hrt, clock, receiver)
    hrt.store.client.delete_item(
        TableName=hrt.store.table_name,
        Key={"pk": {"S": keys.job_pk(first)}, "sk": {"S": keys.JOB_SK}},
    )
    clock.now = free_at + 3_600_000
    assert reuse_key(hrt) == first
    assert_a_fresh_job(hrt, first, receiver)


def test_an_unexpired_job_is_not_replaced(hrt: Runtime, clock: Clock) -> None:
    job_id = submit(hrt)
    jobs.cancel(hrt, "acme", job_id, None)
    record = hrt.store.get_job(job_id)
    assert record is not None
    assert record.expires_at is not None
    clock.now = (record.expires_at - 1) * 1000
    status, body = admission.submit(
        hrt,
        "acme",
        {
            **canonical_task(idempotency_key="keep-key", callback_url=HOOK),
            "params": {"query": {"tags": ["botefuku"]}},
        },
        None,
    )
    assert status == 200
    assert body["job"]["status"] == "cancelled"
    # The store refuses it too: only a job past its expiry is replaced.
    fresh = replace(record, created_at=clock.now, expires_at=None)
    accepted = log.next_event(fresh, EventKind.REQUESTED, clock.now)
    assert not hrt.store.create_job(
        fresh, NewEvent(accepted, expires_at=2_000_000_000), now_s=record.expires_at - 1
    )
