"""The dispatcher as Lambda runs it: the table's stream, read through the template's event
source (jobstream_local/streams.py), feeds its handler; a failed record and those after it are
read again, a batch that keeps failing is given up after its retries (the sweep re-sends what
it named), and a batch handed off twice runs its job once and posts its callback once."""

from __future__ import annotations

import json
import threading
from typing import Any

import boto3
import pytest

from jobstream.domain import SLOT_WAIT_STAGE
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks, execution
from jobstream.service.dispatcher import dispatch_records
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.codec import to_item
from jobstream_local.streams import StreamPoller
from tests.support.dispatch import dispatch_stream
from tests.support.harness import Clock, canonical_task
from tests.support.receiver import receiver

# The test reads every record of the table's stream: only what it wrote may be there.
WHOLE_STREAM = pytest.mark.bare_table


def stream_arn(table_name: str) -> str:
    arn: str = boto3.client("dynamodb").describe_table(TableName=table_name)["Table"][
        "LatestStreamArn"
    ]
    return arn


def poller(table_name: str, handler: Any, max_retries: int = 3) -> StreamPoller:
    """A reader of the whole stream (no filter), as the event source mapping reads it."""
    return StreamPoller(
        streams=boto3.client("dynamodbstreams"),
        stream_arn=stream_arn(table_name),
        function_name="DispatcherFunction",
        handler=handler,
        batch_size=100,
        filters=(),
        stopping=threading.Event(),
        max_retries=max_retries,
    )


def put(table_name: str, *sks: str) -> None:
    client = boto3.client("dynamodb")
    for sk in sks:
        client.put_item(TableName=table_name, Item=to_item({keys.PK: "JOB#x", keys.SK: sk}))


class Failing:
    """A handler that reports `sk`'s record as failed `times` times, and logs what it saw."""

    def __init__(self, sk: str, times: int) -> None:
        self.sk, self.times = sk, times
        self.batches: list[list[str]] = []

    def __call__(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        records = event["Records"]
        self.batches.append([r["dynamodb"]["NewImage"][keys.SK]["S"] for r in records])
        for record in records:
            change = record["dynamodb"]
            if change["NewImage"][keys.SK]["S"] == self.sk and self.times > 0:
                self.times -= 1
                return {"batchItemFailures": [{"itemIdentifier": change["SequenceNumber"]}]}
        return {"batchItemFailures": []}


@WHOLE_STREAM
def test_a_failed_record_and_those_after_it_are_read_again(table_name: str) -> None:
    put(table_name, "a", "b", "c")
    handler = Failing("b", times=1)
    reader = poller(table_name, handler)
    assert reader.drain() == 3 + 2
    assert handler.batches == [["a", "b", "c"], ["b", "c"]]
    put(table_name, "d")
    reader.drain()
    assert handler.batches[-1] == ["d"]


@WHOLE_STREAM
def test_a_batch_failing_past_its_retries_is_given_up(table_name: str) -> None:
    put(table_name, "a", "b")
    handler = Failing("a", times=100)
    reader = poller(table_name, handler, max_retries=2)
    reader.drain()
    # The first try and two retries, then Lambda moves on (the sweep re-sends what it named).
    assert handler.batches == [["a", "b"]] * 3
    put(table_name, "c")
    reader.drain()
    assert handler.batches[-1] == ["c"]


@WHOLE_STREAM
def test_a_handler_that_raises_is_retried_from_the_batch_start(table_name: str) -> None:
    put(table_name, "a", "b")
    calls: list[int] = []

    def crashing(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        calls.append(len(event["Records"]))
        if len(calls) == 1:
            raise RuntimeError("the invocation died")
        return {"batchItemFailures": []}

    poller(table_name, crashing).drain()
    assert calls == [2, 2]


def _received(url: str | None) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs")
    found: list[dict[str, Any]] = []
    while batch := sqs.receive_message(
        QueueUrl=url or "", MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    ).get("Messages", []):
        found += batch
    return found


def test_a_batch_handed_off_twice_runs_its_job_once_and_posts_once(wrt: Runtime) -> None:
    """Lambda may invoke the dispatcher twice with the same records (a retry after a timeout,
    a partial failure before them): the queue hand-off is idempotent, because a job is run only
    by the claim that finds it queued and a callback posted only by the claim that finds it
    due."""
    seen: list[dict[str, Any]] = []

    def twice(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        seen.extend(event["Records"])
        assert dispatch_records(wrt, event["Records"]) == []
        assert dispatch_records(wrt, event["Records"]) == []
        return {"batchItemFailures": []}

    with receiver(204) as hook:
        task = canonical_task(callback_url=hook.url)
        status, body = admission.submit(wrt, "acme", task, None)
        assert status == 202
        job_id = body["job"]["job_id"]
        poller(wrt.settings.table_name, twice).drain()
        work = _received(wrt.settings.work_queue_url)
        assert [json.loads(m["Body"]) for m in work] == [{"job_id": job_id}] * 2
        # In its tenant's message group: SQS fair queues serve a tenant with a backlog no
        # ahead of the others.
        assert {m["Attributes"]["MessageGroupId"] for m in work} == {"acme"}
        for number, message in enumerate(work):
            execution.handle_work_message(
                wrt, message["Body"], f"message-{number}", message["ReceiptHandle"]
            )
        job = wrt.store.get_job(job_id)
        assert job is not None
        assert job.status == "succeeded"
        kinds = [e.kind for e in wrt.store.events_after(job_id, 0, 100)[0]]
        assert kinds.count("job.execution_started") == 1, kinds
        handed = _received(wrt.settings.callback_queue_url)
        # Callbacks too go in their tenant's message group (read from the event's feed place).
        assert {m["Attributes"]["MessageGroupId"] for m in handed} == {"acme"}
        for message in handed:
            if json.loads(message["Body"])["sequence"] == 1:
                callbacks.handle_message(wrt, message["Body"], message["ReceiptHandle"])
        assert len(hook.requests) == 1


def _moto_shard(table_name: str) -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables[table_name].stream_shard


def _live_iterators(table_name: str) -> int:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    shard = _moto_shard(table_name)
    backend = dynamodbstreams_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    return sum(1 for i in backend.shard_iterators.values() if i.stream_shard is shard)


@WHOLE_STREAM
def test_a_cancelled_transaction_reaches_no_reader(table_name: str) -> None:
    """A dispatcher must never hand off what a cancelled admission did not commit."""
    put(table_name, "kept")
    client = boto3.client("dynamodb")
    key = to_item({keys.PK: "JOB#x", keys.SK: "kept"})
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table_name, "Item": to_item({keys.PK: "JOB#x", "sk": "y"})}},
                {
                    "Put": {
                        "TableName": table_name,
                        "Item": key,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    handler = Failing("none", times=0)
    poller(table_name, handler).drain()
    assert handler.batches == [["kept"]]


def test_the_local_stream_keeps_only_what_its_reader_has_not_passed(
    table_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto's stream, bounded (jobstream_local/moto_streams.py): the records and iterators a
    reader has passed are forgotten, so a local stack's memory does not grow with its age; an
    iterator dropped after a failed batch expires after 15 minutes, as on AWS."""
    from jobstream_local import moto_streams

    put(table_name, "a", "b", "c")
    reader = poller(table_name, Failing("b", times=1))
    reader.drain()
    # The abandoned iterator (issued after "c", dropped for the retry from "b") holds the
    # records it had not passed.
    put(table_name, "d", "e")
    reader.drain()
    assert _live_iterators(table_name) == 2
    later = moto_streams.time.monotonic() + moto_streams.ITERATOR_LIFETIME_S + 1
    monkeypatch.setattr(moto_streams.time, "monotonic", lambda: later)
    put(table_name, "f")
    reader.drain()
    assert _live_iterators(table_name) == 1
    assert len(_moto_shard(table_name).items) == 0


def test_a_job_whose_stream_records_were_lost_is_sent_by_the_sweep(
    wrt: Runtime, clock: Clock
) -> None:
    """The dispatcher never saw the admission (its records aged out of the stream, or its
    trigger was disabled): the sweep sends the job and its callback once the grace is over."""
    task = canonical_task(callback_url="https://consumer.example.test/hooks")
    job_id = admission.submit(wrt, "acme", task, None)[1]["job"]["job_id"]
    assert _received(wrt.settings.work_queue_url) == []
    assert _received(wrt.settings.callback_queue_url) == []
    assert sweep(wrt).jobs_redispatched == 0  # a dispatcher may still be coming
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    report = sweep(wrt)
    assert (report.jobs_redispatched, report.callbacks_resent) == (1, 1)
    work = _received(wrt.settings.work_queue_url)
    assert [json.loads(m["Body"]) for m in work] == [{"job_id": job_id}]
    assert [m["Attributes"]["MessageGroupId"] for m in work] == ["acme"]  # its tenant's group
    hooks = _received(wrt.settings.callback_queue_url)
    assert [json.loads(m["Body"]) for m in hooks] == [{"job_id": job_id, "sequence": 1}]


def test_a_job_waiting_for_a_slot_is_not_sent_again(wrt: Runtime, clock: Clock) -> None:
    """A queued job that finds every slot of its resource held shows it on its job item
    (`note_waiting`: its event count still 1, never re-dispatched): the dispatcher, reading the
    stream through the template's filter, sent it once, at its admission (its slot's release
    sends it next)."""
    task = canonical_task(callback_url=None)
    job_id = admission.submit(wrt, "acme", task, None)[1]["job"]["job_id"]
    dispatch_stream(wrt)
    assert [json.loads(m["Body"]) for m in _received(wrt.settings.work_queue_url)] == [
        {"job_id": job_id}
    ]
    record = wrt.store.get_job_item(job_id)
    assert record is not None
    assert wrt.store.note_waiting(
        record, stage=SLOT_WAIT_STAGE, message="waiting for a slot", now=clock.advance(5)
    )
    assert dispatch_stream(wrt) == 1  # the note's record was read, and not taken for a new job
    assert _received(wrt.settings.work_queue_url) == []
