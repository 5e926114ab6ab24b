"""Retention (issue 13 item 9): a finished job and every item of it carry `expires_at` (epoch
seconds, DynamoDB TTL); an open job carries it nowhere; an open callback intent never does.

Items are read raw from the table (tests/support/state.py: whole_table), as TTL sees them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from jobstream.delivery.http import HttpResult
from jobstream.domain import IntentRef
from jobstream.protocol.errors import Reason
from jobstream.service import admission, callbacks, execution, jobs, stream
from jobstream.service.liveness import expire
from jobstream.service.retention import SECONDS_PER_DAY, expiry_of, retire
from jobstream.service.runtime import Runtime
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.callbacks import CallbackStore
from jobstream.store.jobs import JobStore
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


def submit(rt: Runtime, key: str = "keep-key", **overrides: Any) -> str:
    task = canonical_task(idempotency_key=key, callback_url=HOOK, **overrides)
    task["params"] = {"query": {"tags": ["botefuku"]}}
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


def retiring_entries(rt: Runtime) -> list[dict[str, Any]]:
    return [
        item
        for item in whole_table(rt).values()
        if keys.sweep_kind(item.get("sweep_pk", {}).get("S", "")) == keys.RETIRING_JOBS
    ]


def assert_all_expire_at(rt: Runtime, job_id: str, expires_at: int) -> None:
    found = items_of(rt, job_id)
    assert keys.JOB_SK in found
    assert any(sk.startswith(keys.EVENT_PREFIX) for sk in found)
    for sk, item in found.items():
        assert expiry(item) == expires_at, f"{sk} expires at {expiry(item)}"


def cancel_for_expiry(rt: Runtime, job_id: str) -> int:
    """Finish the job (cancel) and return the expiry its terminal event gave it."""
    jobs.cancel(rt, "acme", job_id, None)
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.expires_at is not None
    return record.expires_at


def with_a_dead_callback(rt: Runtime, receiver: Receiver) -> str:
    """A job whose first callback died (the receiver answered 410)."""
    job_id = submit(rt)
    receiver.status = 410
    assert callbacks.deliver(rt, IntentRef(job_id, 1)).outcome == "dead"
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
def test_a_finished_jobs_items_all_carry_its_expiry(
    hrt: Runtime, clock: Clock, finish: Callable[[Runtime, str, Clock], None]
) -> None:
    job_id = submit(hrt)
    deliver_all(hrt, job_id)  # the accepted event's callback: closed before the job ends
    finish(hrt, job_id, clock)
    deliver_all(hrt, job_id)  # the terminal event's callback: closes after the job ended
    record = hrt.store.get_job(job_id)
    assert record is not None
    assert record.is_terminal
    assert record.event_count >= 2
    assert record.expires_at == -(-record.last_event_at // 1000) + 30 * SECONDS_PER_DAY
    assert_all_expire_at(hrt, job_id, record.expires_at)
    # Events and intents, one of each per event, all stamped; the job left the RETIRING backlog.
    found = items_of(hrt, job_id)
    assert sum(sk.startswith(keys.INTENT_PREFIX) for sk in found) == record.event_count
    assert retiring_entries(hrt) == []


def test_the_expiry_is_in_seconds_and_follows_the_setting(rt: Runtime) -> None:
    settings = rt.settings.model_copy(update={"retention_days": 7})
    assert expiry_of(1_790_481_174_001, settings) == 1_790_481_175 + 7 * 86_400
    assert expiry_of(1_790_481_174_000, settings) == 1_790_481_174 + 7 * 86_400


def test_an_open_job_carries_no_expiry_anywhere(hrt: Runtime, clock: Clock) -> None:
    job_id = submit(hrt)
    deliver_all(hrt, job_id)
    record = execution.claim(hrt, job_id, "worker-1")
    assert record is not None
    with execution.Lease(hrt, record, "worker-1") as lease:
        clock.advance(10_000)
        lease.progress("scanning", "1 of 3")
        deliver_all(hrt, job_id)
    found = items_of(hrt, job_id)
    assert len(found) == 1 + 3 + 3  # the job, 3 events, 3 intents (all delivered)
    assert all(keys.TTL_ATTRIBUTE not in item for item in found.values()), found
    assert all("retain_until" not in item for item in found.values())
    assert sweep(hrt).jobs_retired == 0


def test_an_open_intent_is_never_expired(hrt: Runtime, clock: Clock, receiver: Receiver) -> None:
    """Intents still open when their job finishes (one retrying, one never tried) learn the
    job's expiry and take it only when they are delivered or dead."""
    job_id = submit(hrt)
    receiver.status = 503
    assert callbacks.deliver(hrt, IntentRef(job_id, 1)).outcome == "retry"
    expires_at = cancel_for_expiry(hrt, job_id)
    for sequence in (1, 2):
        intent = hrt.callbacks.get(IntentRef(job_id, sequence))
        assert intent is not None
        assert intent.state in {"retry_wait", "pending"}
        assert (intent.retain_until, intent.expires_at) == (expires_at, None)
    # Every other item of the finished job carries the expiry.
    for sk, item in items_of(hrt, job_id).items():
        if not sk.startswith(keys.INTENT_PREFIX):
            assert expiry(item) == expires_at, sk
    # Even a sweep long after leaves the open intents without one.
    clock.advance(keys.HANDOFF_GRACE_MS * 10)
    sweep(hrt)
    assert hrt.callbacks.get(IntentRef(job_id, 2)).expires_at is None  # type: ignore[union-attr]
    # Delivered: the expiry of its job. Dead (permanent 4xx): the same.
    receiver.status = 204
    assert callbacks.deliver(hrt, IntentRef(job_id, 2)).outcome == "delivered"
    receiver.status = 410
    assert callbacks.deliver(hrt, IntentRef(job_id, 1)).outcome == "dead"
    assert_all_expire_at(hrt, job_id, expires_at)


def test_a_redriven_dead_intent_loses_its_expiry_until_it_closes_again(
    hrt: Runtime, clock: Clock, receiver: Receiver
) -> None:
    job_id = with_a_dead_callback(hrt, receiver)
    jobs.cancel(hrt, "acme", job_id, None)
    deliver_all(hrt, job_id)
    dead = hrt.callbacks.get(IntentRef(job_id, 1))
    assert dead is not None
    assert dead.expires_at is not None
    revived = hrt.callbacks.revive(IntentRef(job_id, 1), now=clock.advance(1_000))
    assert revived is not None
    assert (revived.state, revived.expires_at) == ("pending", None)
    receiver.status = 204
    assert callbacks.deliver(hrt, IntentRef(job_id, 1)).outcome == "delivered"
    assert hrt.callbacks.get(IntentRef(job_id, 1)).expires_at == dead.expires_at  # type: ignore[union-attr]


def test_an_intent_that_closes_while_it_learns_the_expiry_is_stamped(hrt: Runtime) -> None:
    """The retention step reads an intent open; it is delivered before the step tells it the
    job's expiry, so its closer saw no date: the step stamps it itself."""
    job_id = submit(hrt)
    expires_at = cancel_for_expiry(hrt, job_id)
    # Undo what the cancel's retention step did to intent 1, and deliver it.
    hrt.store.client.update_item(
        TableName=hrt.store.table_name,
        Key={"pk": {"S": keys.job_pk(job_id)}, "sk": {"S": keys.intent_sk(1)}},
        UpdateExpression="REMOVE retain_until, expires_at",
    )
    assert callbacks.deliver(hrt, IntentRef(job_id, 1)).outcome == "delivered"
    assert hrt.callbacks.get(IntentRef(job_id, 1)).expires_at is None  # type: ignore[union-attr]
    hrt.callbacks.retain(IntentRef(job_id, 1), expires_at=expires_at, closed=False)
    assert hrt.callbacks.get(IntentRef(job_id, 1)).expires_at == expires_at  # type: ignore[union-attr]


def test_a_close_whose_stamp_was_lost_is_stamped_when_its_message_returns(
    hrt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attempt in flight when its job finishes learns the date only after its claim: it
    stamps the intent in a second write after closing it; a crash in between is repaired when
    SQS delivers the message again."""
    job_id = submit(hrt)
    ref = IntentRef(job_id, 1)
    claimed = hrt.callbacks.claim(ref, now=clock.now, lease_ms=60_000)
    assert claimed is not None
    assert claimed.retain_until is None
    jobs.cancel(hrt, "acme", job_id, None)  # its retention step tells the in-flight intent

    def crash(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the function died after recording the delivery")

    with monkeypatch.context() as patch:
        patch.setattr(CallbackStore, "stamp", crash)
        with pytest.raises(RuntimeError):
            hrt.callbacks.mark_delivered(claimed, now=clock.advance(1), status=204)
    closed = hrt.callbacks.get(ref)
    assert closed is not None
    assert (closed.state, closed.expires_at) == ("delivered", None)
    assert closed.retain_until is not None
    # SQS delivers the message again: no second POST, and the intent gets its expiry.
    assert callbacks.deliver(hrt, ref).outcome == "settled"
    assert hrt.callbacks.get(ref).expires_at == closed.retain_until  # type: ignore[union-attr]


def test_the_terminal_intent_takes_its_expiry_in_its_closing_write(hrt: Runtime) -> None:
    job_id = submit(hrt)
    jobs.cancel(hrt, "acme", job_id, None)
    ref = IntentRef(job_id, 2)

    def unexpected(*_: Any, **__: Any) -> Any:
        raise AssertionError("a second write")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CallbackStore, "stamp", unexpected)
        assert callbacks.deliver(hrt, ref).outcome == "delivered"
    record = hrt.store.get_job(job_id)
    assert record is not None
    assert hrt.callbacks.get(ref).expires_at == record.expires_at  # type: ignore[union-attr]


def test_the_sweep_finishes_a_retention_step_that_failed(
    hrt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = submit(hrt)
    deliver_all(hrt, job_id)

    def unavailable(*_: Any, **__: Any) -> Any:
        raise RuntimeError("DynamoDB is unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(JobStore, "stamp_event", unavailable)
        jobs.cancel(hrt, "acme", job_id, None)  # the cancel itself still succeeds
    record = hrt.store.get_job(job_id)
    assert record is not None
    assert record.status == "cancelled"
    assert expiry(items_of(hrt, job_id)[keys.event_sk(1)]) is None
    (entry,) = retiring_entries(hrt)
    assert entry["sk"]["S"] == keys.event_sk(record.event_count)
    # Not before the grace period: the step of the process that finished the job may still run.
    assert sweep(hrt).jobs_retired == 0
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    report = sweep(hrt)
    assert (report.jobs_retired, report.errors) == (1, 0)
    deliver_all(hrt, job_id)
    assert record.expires_at is not None
    assert_all_expire_at(hrt, job_id, record.expires_at)
    assert retiring_entries(hrt) == []
    assert sweep(hrt).jobs_retired == 0


def test_retire_is_idempotent(hrt: Runtime) -> None:
    job_id = submit(hrt)
    deliver_all(hrt, job_id)
    expires_at = cancel_for_expiry(hrt, job_id)
    deliver_all(hrt, job_id)
    before = items_of(hrt, job_id)
    retire(hrt, job_id, 2, expires_at)
    assert items_of(hrt, job_id) == before


def test_a_key_reused_after_its_job_expired_admits_a_new_job(hrt: Runtime, clock: Clock) -> None:
    """The retention period is also the idempotency window (docs/protocol.md)."""
    first = submit(hrt)
    deliver_all(hrt, first)
    assert execution.execute(hrt, first) == "succeeded"
    deliver_all(hrt, first)
    old = hrt.store.get_job(first)
    assert old is not None
    assert old.expires_at is not None
    assert len(items_of(hrt, first)) > 3
    # Within the window the key names the finished job (other params: a conflict).
    task = canonical_task(idempotency_key="keep-key", callback_url=HOOK)
    task["params"] = {"query": {"tags": ["other"]}}
    with pytest.raises(Exception, match="different params"):
        admission.submit(hrt, "acme", task, None)
    # Past it, TTL may not have deleted every item yet: the key admits a new job all the same.
    clock.now = old.expires_at * 1000
    status, body = admission.submit(hrt, "acme", task, None)
    assert status == 202
    assert body["job"]["job_id"] == first  # the id is derived from the key
    fresh = hrt.store.get_job(first)
    assert fresh is not None
    assert (fresh.status, fresh.event_count, fresh.expires_at) == ("queued", 1, None)
    found = items_of(hrt, first)
    assert sorted(found) == [keys.JOB_SK, keys.intent_sk(1), keys.event_sk(1)]
    assert all(keys.TTL_ATTRIBUTE not in item for item in found.values())
    page = stream.events_page(hrt, "acme", first, {}, None)
    assert [event["type"] for event in page["events"]] == ["job.accepted"]


def test_an_unexpired_job_is_not_purged(hrt: Runtime, clock: Clock) -> None:
    job_id = submit(hrt)
    expires_at = cancel_for_expiry(hrt, job_id)
    assert hrt.store.purge_expired(job_id, now_s=expires_at - 1) == 0
    clock.now = (expires_at - 1) * 1000
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


def test_the_dead_letters_of_an_expired_job_are_not_redriven(
    hrt: Runtime, clock: Clock, receiver: Receiver
) -> None:
    job_id = with_a_dead_callback(hrt, receiver)
    expires_at = cancel_for_expiry(hrt, job_id)
    assert hrt.callbacks.revive(IntentRef(job_id, 1), now=expires_at * 1000) is None


def test_a_stale_stamp_never_gives_an_open_intent_an_expiry(
    hrt: Runtime, clock: Clock, receiver: Receiver
) -> None:
    """The conditions of `stamp` and of `retain`'s closed branch alone: both act on what an
    earlier read said (closed), and the intent has been redriven (open) since."""
    job_id = with_a_dead_callback(hrt, receiver)
    jobs.cancel(hrt, "acme", job_id, None)
    closed = hrt.callbacks.get(IntentRef(job_id, 1))
    assert closed is not None
    assert closed.expires_at is not None
    assert hrt.callbacks.revive(IntentRef(job_id, 1), now=clock.advance(1)) is not None
    assert hrt.callbacks.stamp(closed) is None
    hrt.callbacks.retain(IntentRef(job_id, 1), expires_at=closed.expires_at, closed=True)
    reopened = hrt.callbacks.get(IntentRef(job_id, 1))
    assert reopened is not None
    assert (reopened.state, reopened.expires_at) == ("pending", None)
    assert reopened.retain_until == closed.retain_until


def test_stamping_never_makes_an_item(hrt: Runtime) -> None:
    """An event TTL (or a purge) deleted while the retention step ran is not written back."""
    job_id = submit(hrt)
    before = items_of(hrt, job_id)
    hrt.store.stamp_event(job_id, 7, 2_000_000_000)
    hrt.store.finish_retiring(job_id, 7)
    hrt.callbacks.retain(IntentRef(job_id, 7), expires_at=2_000_000_000, closed=False)
    assert items_of(hrt, job_id) == before
