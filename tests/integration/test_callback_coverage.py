"""I5 without an index entry per event: a callback whose hand-off was lost is found through its
open job, or, once the job has ended, through its terminal callback (service/callback_coverage)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from jobstream.domain import IntentRef
from jobstream.retries import OutOfTimeError
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks, execution, jobs
from jobstream.service.sweep import sweep
from jobstream.store import keys
from tests.integration.test_callbacks import drain, intent, messages, submit
from tests.support.client_hooks import hooked
from tests.support.dispatch import dispatch_stream
from tests.support.harness import Clock, canonical_task
from tests.support.receiver import receiver
from tests.support.state import among_open_jobs


def _lose_hand_offs(rt: Runtime, patch: pytest.MonkeyPatch) -> None:
    """The dispatcher's sends fail through all of Lambda's retries: what it reads is lost."""

    def broken_send(*args: Any, **kwargs: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="https://sqs.invalid")

    patch.setattr(rt.callback_queue.client, "send_message_batch", broken_send)
    dispatch_stream(rt)


def _sweep_entries(rt: Runtime, job_id: str) -> dict[int, str]:
    """The job's event items that have an entry in the sweep index: sequence -> its kind."""
    items = boto3.client("dynamodb").query(
        TableName=rt.settings.table_name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :evt)",
        ExpressionAttributeValues={
            ":pk": {"S": keys.job_pk(job_id)},
            ":evt": {"S": keys.EVENT_PREFIX},
        },
        ConsistentRead=True,
    )["Items"]
    return {
        keys.sequence_of(item["sk"]["S"]): keys.sweep_kind(item["sweep_pk"]["S"])
        for item in items
        if "sweep_pk" in item
    }


@contextlib.contextmanager
def job_item_updates(rt: Runtime) -> Iterator[list[str]]:
    """The jobs whose item (`#JOB`) an UpdateItem of the runtime's store names, in order."""
    updated: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        if params["Key"][keys.SK]["S"] == keys.JOB_SK:
            updated.append(keys.job_id_of(params["Key"][keys.PK]["S"]))

    with hooked(rt.store.client, "provide-client-params.dynamodb.UpdateItem", record, "job-w"):
        yield updated


def test_no_callback_enters_the_sweep_index_the_job_covers_them_until_its_end_is_delivered(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert _sweep_entries(crt, job_id) == {}
        assert among_open_jobs(crt, job_id)
        assert execution.execute(crt, job_id) == "succeeded"
        record = crt.store.get_job_item(job_id)
        assert record is not None
        terminal = record.event_count
        # Ended, its terminal callback not yet delivered: the job still covers it.
        assert _sweep_entries(crt, job_id) == {}
        assert among_open_jobs(crt, job_id)
        drain(crt, queues)
        assert len(hook.requests) == terminal
    # Every callback delivered: nothing is left in the index, the job's entry included.
    assert _sweep_entries(crt, job_id) == {}
    assert not among_open_jobs(crt, job_id)
    assert all(intent(crt, job_id, n).state == "delivered" for n in range(1, terminal + 1))


def test_a_job_without_a_callback_leaves_the_open_jobs_with_its_terminal_event(
    crt: Runtime,
) -> None:
    task = canonical_task(idempotency_key="plain")
    del task["callback_url"]
    status, body = admission.submit(crt, "acme", task, None)
    assert status == 202
    job_id = body["job"]["job_id"]
    assert execution.execute(crt, job_id) == "succeeded"
    assert not among_open_jobs(crt, job_id)
    record = crt.store.get_job_item(job_id)
    assert record is not None
    assert record.pending_event is None  # its description leaves with it


@pytest.mark.parametrize(
    "failure",
    [
        OutOfTimeError("DynamoDB UpdateItem: no time left for an attempt"),
        EndpointConnectionError(endpoint_url="https://dynamodb.invalid"),
    ],
)
def test_a_job_that_could_not_leave_the_open_jobs_has_still_ended(
    crt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """Its terminal event written, the job's leaving the open jobs fails: the commit stands
    (the run succeeded, no error), and the sweep takes the job off a grace period later."""
    task = canonical_task(idempotency_key="stays")
    del task["callback_url"]
    status, body = admission.submit(crt, "acme", task, None)
    assert status == 202
    job_id = body["job"]["job_id"]

    def failing(*_: Any, **__: Any) -> bool:
        raise failure

    with monkeypatch.context() as patch:
        patch.setattr(crt.store, "leave_active", failing)
        assert execution.execute(crt, job_id) == "succeeded"
    assert among_open_jobs(crt, job_id)
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    assert sweep(crt).ended_jobs_released == 1
    assert not among_open_jobs(crt, job_id)


def test_a_terminal_callback_that_fails_an_attempt_takes_the_jobs_cover_over(
    crt: Runtime, clock: Clock
) -> None:
    """Waiting for its retry under an entry of its own, the terminal callback covers the job's
    other callbacks: the job leaves the open jobs, with one write of its item; the retry that
    delivers it (its entry its own cover) writes the job's item no more."""
    with receiver(503, 204) as hook:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
        record = crt.store.get_job_item(job_id)
        assert record is not None
        ref = IntentRef(job_id, record.event_count)
        with job_item_updates(crt) as updates:
            callbacks.deliver(crt, ref)
            assert intent(crt, job_id, ref.sequence).state == "retry_wait"
            entries = _sweep_entries(crt, job_id)
            assert entries[ref.sequence] == keys.SweepBacklog.CALLBACK_HANDOFF
            assert not among_open_jobs(crt, job_id)
            assert updates == [job_id]
            clock.advance(intent(crt, job_id, ref.sequence).next_attempt_at - clock.now)
            callbacks.deliver(crt, ref)
            assert updates == [job_id]
        assert intent(crt, job_id, ref.sequence).state == "delivered"
        assert len(hook.requests) == 2


def test_only_a_terminal_callback_its_job_covers_writes_the_job_item(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    """Delivering a job's callbacks writes its item once: the terminal one's, which takes it
    off the open jobs; the others' write their own items only."""
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
        with job_item_updates(crt) as updates:
            drain(crt, queues)
        assert len(hook.requests) == 3
    assert updates == [job_id]
    assert not among_open_jobs(crt, job_id)


def test_the_sweep_takes_an_ended_job_off_the_open_jobs_its_callback_delivered(
    crt: Runtime, queues: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The terminal callback was delivered but its attempt could not take the job off the
    open jobs (a throttled write): the sweep does, once, and re-sends nothing."""
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"

        def throttled(*_: Any, **__: Any) -> bool:
            raise RuntimeError("ProvisionedThroughputExceededException")

        with monkeypatch.context() as patch:
            patch.setattr(crt.store, "leave_active", throttled)
            drain(crt, queues)
        assert len(hook.requests) == 3
        assert among_open_jobs(crt, job_id)
        record = crt.store.get_job_item(job_id)
        assert record is not None
        # Within the grace period after its end the sweep leaves it alone.
        clock.advance(record.last_event_at + keys.HANDOFF_GRACE_MS - 1 - clock.now)
        assert sweep(crt).ended_jobs_released == 0
        assert among_open_jobs(crt, job_id)
        clock.advance(2)
        report = sweep(crt)
        assert (report.ended_jobs_released, report.callbacks_resent) == (1, 0)
        assert not among_open_jobs(crt, job_id)
        assert sweep(crt).ended_jobs_released == 0
    assert len(hook.requests) == 3


def test_a_lost_hand_off_of_an_open_job_is_sent_by_the_sweep_after_the_grace_period(
    crt: Runtime, queues: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        with monkeypatch.context() as patch:
            _lose_hand_offs(crt, patch)
        clock.advance(keys.HANDOFF_GRACE_MS - 1)
        assert sweep(crt).callbacks_resent == 0  # a delivery may still be coming
        clock.advance(2)
        assert sweep(crt).callbacks_resent == 1
        assert intent(crt, job_id).resent_at == clock.now
        # Once per grace period, not every sweep: the next look is a grace period later.
        assert sweep(crt).callbacks_resent == 0
        drain(crt, queues)
        assert [json.loads(r.body)["type"] for r in hook.requests] == ["job.accepted"]
        clock.advance(keys.HANDOFF_GRACE_MS + 1)
        assert sweep(crt).callbacks_resent == 0
    assert intent(crt, job_id).state == "delivered"


def test_a_lost_hand_off_is_covered_by_the_terminal_callback_once_the_job_ends(
    crt: Runtime, queues: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job ends before the sweep looked at it: its terminal callback, delivered first,
    gives the lost one an entry of its own, and the sweep sends it."""
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        with monkeypatch.context() as patch:
            _lose_hand_offs(crt, patch)
        assert execution.execute(crt, job_id) == "succeeded"
        drain(crt, queues)
        delivered = [json.loads(r.body)["type"] for r in hook.requests]
        assert "job.accepted" not in delivered
        assert "job.succeeded" in delivered
        # The lost one now has its own entry, due a grace period after its event.
        assert _sweep_entries(crt, job_id) == {1: keys.SweepBacklog.CALLBACK_HANDOFF}
        # That write is no new callback to the dispatcher (it reads it from the stream): a
        # message of it may still be queued, or its first attempt under way without a claim.
        dispatch_stream(crt)
        assert messages(crt) == []
        assert sweep(crt).callbacks_resent == 0
        clock.advance(keys.HANDOFF_GRACE_MS + 1)
        assert sweep(crt).callbacks_resent == 1
        drain(crt, queues)
        assert json.loads(hook.requests[-1].body)["type"] == "job.accepted"
    assert _sweep_entries(crt, job_id) == {}


def test_a_due_terminal_callback_brings_its_jobs_lost_ones_with_it(
    crt: Runtime, queues: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every hand-off of the job was lost, its end's too: a grace period after its end the
    sweep gives its terminal callback an entry of its own, takes the job off the open jobs, and
    sends that callback and, through it, the job's others."""
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
        with monkeypatch.context() as patch:
            _lose_hand_offs(crt, patch)
        record = crt.store.get_job_item(job_id)
        assert record is not None
        clock.advance(keys.HANDOFF_GRACE_MS + 1)
        report = sweep(crt)
        assert (report.ended_jobs_released, report.callbacks_resent) == (1, record.event_count)
        assert not among_open_jobs(crt, job_id)
        assert set(_sweep_entries(crt, job_id)) == {record.event_count}
        drain(crt, queues)
        assert len(hook.requests) == record.event_count
        clock.advance(keys.HANDOFF_GRACE_MS + 1)
        assert sweep(crt).callbacks_resent == 0
    assert _sweep_entries(crt, job_id) == {}


def test_a_terminal_callback_that_dies_hands_its_cover_over(
    crt: Runtime, queues: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead terminal callback leaves the hand-off shards for the dead ones: an open callback
    of its job without an entry gets one first."""
    with receiver(400) as hook:
        job_id = submit(crt, hook.url)
        with monkeypatch.context() as patch:
            _lose_hand_offs(crt, patch)
        assert execution.execute(crt, job_id) == "succeeded"
        drain(crt, queues)
        record = crt.store.get_job_item(job_id)
        assert record is not None
        assert intent(crt, job_id, record.event_count).state == "dead"
        assert len(hook.requests) == record.event_count - 1
    entries = _sweep_entries(crt, job_id)
    assert entries[1] == keys.SweepBacklog.CALLBACK_HANDOFF
    assert entries[record.event_count] == keys.SweepBacklog.CALLBACK_DEAD
    assert IntentRef(job_id, 1) in set(crt.callbacks.due(now=clock.now + keys.HANDOFF_GRACE_MS))


def test_the_hand_over_reads_the_jobs_callbacks_consistently(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    """A callback written a moment before the terminal event (a progress report) must be in
    the read that decides which callbacks get an entry of their own: an eventually consistent
    Query may miss it on DynamoDB (moto never does, so the request itself is checked)."""
    reads: list[bool] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        if params.get("KeyConditionExpression", "").startswith("#pk = :pk AND #sk BETWEEN"):
            reads.append(bool(params.get("ConsistentRead")))

    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
        with hooked(crt.store.client, "provide-client-params.dynamodb.Query", record, "of-job"):
            drain(crt, queues)
        assert len(hook.requests) == 3
    # The terminal callback's hand-over, as it leaves the hand-off shards: one read, consistent.
    assert reads == [True]


def test_an_ended_job_leaves_the_open_jobs_only_at_its_terminal_event_and_once(
    crt: Runtime,
) -> None:
    """`leave_active` never takes an open job's cover away, nor an ended job's while its
    stream has an event after the one named; it answers whether it took the job off."""
    url = "https://consumer.example.test/hooks"
    open_id = submit(crt, url, key="still-open")
    opened = crt.store.get_job_item(open_id)
    assert opened is not None
    assert not crt.store.leave_active(open_id, sequence=opened.event_count)
    assert among_open_jobs(crt, open_id)

    ended_id = submit(crt, url, key="ended")
    jobs.cancel(crt, "acme", ended_id, None)
    ended = crt.store.get_job_item(ended_id)
    assert ended is not None
    assert ended.is_terminal
    assert among_open_jobs(crt, ended_id)  # its terminal callback is not delivered
    assert not crt.store.leave_active(ended_id, sequence=ended.event_count - 1)
    assert among_open_jobs(crt, ended_id)
    assert crt.store.leave_active(ended_id, sequence=ended.event_count)
    assert not among_open_jobs(crt, ended_id)
    left = crt.store.get_job_item(ended_id)
    assert left is not None
    assert left.pending_event is None
    assert not crt.store.leave_active(ended_id, sequence=ended.event_count)


def test_a_terminal_callback_waiting_for_its_retry_brings_its_jobs_lost_ones_with_it(
    crt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job left the open jobs when its terminal callback failed an attempt: when that
    one's entry falls due, the sweep sends it and the job's open callbacks without an entry
    (a lost hand-off, one never attempted)."""
    with receiver(503) as hook:
        job_id = submit(crt, hook.url)
        with monkeypatch.context() as patch:
            _lose_hand_offs(crt, patch)
        assert execution.execute(crt, job_id) == "succeeded"
        record = crt.store.get_job_item(job_id)
        assert record is not None
        terminal = IntentRef(job_id, record.event_count)
        callbacks.deliver(crt, terminal)
        assert not among_open_jobs(crt, job_id)
        assert set(_sweep_entries(crt, job_id)) == {terminal.sequence}
        due = intent(crt, job_id, terminal.sequence).next_attempt_at + keys.HANDOFF_GRACE_MS
        clock.advance(due - clock.now)
        assert sweep(crt).callbacks_resent == record.event_count
