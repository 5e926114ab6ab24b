"""I5 without an index entry per event: a callback whose hand-off was lost is found through its
open job, or, once the job has ended, through its terminal callback (service/callback_coverage)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError

from jobstream.domain import IntentRef
from jobstream.runtime import Runtime
from jobstream.service import execution
from jobstream.service.sweep import sweep
from jobstream.store import keys
from tests.integration.test_callbacks import drain, intent, messages, submit
from tests.support.client_hooks import hooked
from tests.support.dispatch import dispatch_stream
from tests.support.harness import Clock
from tests.support.receiver import receiver


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


def test_only_the_terminal_callback_enters_the_sweep_index(
    crt: Runtime, queues: dict[str, Any]
) -> None:
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert _sweep_entries(crt, job_id) == {}
        assert execution.execute(crt, job_id) == "succeeded"
        record = crt.store.get_job_item(job_id)
        assert record is not None
        terminal = record.event_count
        assert _sweep_entries(crt, job_id) == {terminal: keys.SweepBacklog.CALLBACK_HANDOFF}
        drain(crt, queues)
        assert len(hook.requests) == terminal
    # Every callback delivered: nothing is left in the index.
    assert _sweep_entries(crt, job_id) == {}
    assert all(intent(crt, job_id, n).state == "delivered" for n in range(1, terminal + 1))


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
    """Every hand-off of the job was lost, its end's too: the terminal callback's entry falls
    due, and the sweep sends it and the job's others."""
    with receiver(204) as hook:
        job_id = submit(crt, hook.url)
        assert execution.execute(crt, job_id) == "succeeded"
        with monkeypatch.context() as patch:
            _lose_hand_offs(crt, patch)
        record = crt.store.get_job_item(job_id)
        assert record is not None
        clock.advance(keys.HANDOFF_GRACE_MS + 1)
        assert sweep(crt).callbacks_resent == record.event_count
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
