"""A commit is the job's conditional write, then its event's put (store/pending.py). A writer
that dies between the two leaves the event described on the job; whoever comes next writes it:
the dispatcher for a job's first and terminal commits, the next appender before its own write, a
page that finds the job ahead of its events. Each written late is the same event (its sequence,
kind and `at`), its callback watched by the sweep, in the feed from when it was written."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import boto3

from jobstream.runtime import Runtime
from jobstream.store import keys
from jobstream.store.codec import from_item
from tests.support.client_hooks import hooked
from tests.support.dispatch import dispatch_stream
from tests.support.harness import Api, Clock, canonical_task


class CrashError(Exception):
    """The invocation dies here (not an AWS error: nothing retries it)."""


@contextlib.contextmanager
def dying_before_event_put(rt: Runtime) -> Iterator[list[str]]:
    """The invocation dies just before its first event put: after its job's write."""
    died: list[str] = []

    def before(params: dict[str, Any], **_: Any) -> None:
        sort_key = params.get("Item", {}).get(keys.SK, {}).get("S", "")
        if sort_key.startswith(keys.EVENT_PREFIX) and not died:
            died.append(sort_key)
            raise CrashError(sort_key)

    with hooked(rt.store.client, "provide-client-params.dynamodb.PutItem", before, "dies"):
        yield died


def item(rt: Runtime, job_id: str, sort_key: str) -> dict[str, Any] | None:
    found = rt.store.client.get_item(
        TableName=rt.settings.table_name,
        Key={keys.PK: {"S": keys.job_pk(job_id)}, keys.SK: {"S": sort_key}},
        ConsistentRead=True,
    ).get("Item")
    return from_item(found) if found else None


def admitted(api: Api) -> str:
    response = api.post("/jobs", canonical_task())
    assert response.status == 202, response.body
    return str(response.body["job"]["job_id"])


def kinds(api: Api, job_id: str) -> list[str]:
    response = api.get(f"/jobs/{job_id}/events")
    assert response.status == 200, response.body
    return [event["payload"]["detail"]["internal_kind"] for event in response.body["events"]]


def test_an_admission_that_died_before_its_event_is_completed_by_the_dispatcher(
    crt: Runtime, clock: Clock
) -> None:
    api = Api(token="acme-token")
    with dying_before_event_put(crt) as died:
        response = api.post("/jobs", canonical_task())
    assert died == [keys.event_sk(1)]
    assert response.status >= 500  # the invocation died: its client tries again
    (job_id,) = [
        keys.job_id_of(entry[keys.PK])
        for entry in map(
            from_item, crt.store.client.scan(TableName=crt.settings.table_name)["Items"]
        )
        if entry[keys.SK] == keys.JOB_SK
    ]
    job = crt.store.get_job_item(job_id)
    assert job is not None
    assert job.event_count == 1
    assert job.pending_event is not None
    assert item(crt, job_id, keys.event_sk(1)) is None

    clock.advance(5_000)
    dispatch_stream(crt)

    event = item(crt, job_id, keys.event_sk(1))
    assert event is not None
    assert (event["kind"], event["at"]) == ("job.requested", job.last_event_at)
    # Its callback, written late, has its own sweep entry; it enters the feed when written.
    assert event["state"] == "pending"
    assert "sweep_pk" in event
    assert event["feed_sk"] == keys.feed_sk(clock.now, job_id, 1)
    # The client's retry is a replay of the same job, its stream whole.
    assert api.post("/jobs", canonical_task()).status == 200
    assert kinds(api, job_id) == ["job.requested"]


def test_a_terminal_commit_that_died_before_its_event_is_completed_by_the_dispatcher(
    crt: Runtime, clock: Clock
) -> None:
    api = Api(token="acme-token")
    job_id = admitted(api)
    dispatch_stream(crt)
    with dying_before_event_put(crt) as died:
        api.post(f"/jobs/{job_id}/cancel")
    assert died == [keys.event_sk(2)]
    job = crt.store.get_job_item(job_id)
    assert job is not None
    assert job.status == "cancelled"
    assert job.event_count == 2

    dispatch_stream(crt)

    event = item(crt, job_id, keys.event_sk(2))
    assert event is not None
    assert event["kind"] == "job.outcome_cancelled"
    assert event["state"] == "pending"
    assert "sweep_pk" in event
    # The dispatcher's own write is a new callback: handed off like any other.
    sent = boto3.client("sqs").receive_message(
        QueueUrl=crt.settings.callback_queue_url or "", MaxNumberOfMessages=10
    )["Messages"]
    assert {json.loads(message["Body"])["sequence"] for message in sent} == {1, 2}
    assert kinds(api, job_id) == ["job.requested", "job.outcome_cancelled"]


def test_the_next_appender_writes_the_event_before_its_own(rt: Runtime) -> None:
    api = Api(token="acme-token")
    with dying_before_event_put(rt):
        api.post("/jobs", canonical_task())
    (job_id,) = [
        keys.job_id_of(entry[keys.PK])
        for entry in map(from_item, rt.store.client.scan(TableName=rt.settings.table_name)["Items"])
        if entry[keys.SK] == keys.JOB_SK
    ]
    # No dispatcher ran: the cancel's own commit writes event 1 first, then its own.
    assert api.post(f"/jobs/{job_id}/cancel").status == 200
    first, second = item(rt, job_id, keys.event_sk(1)), item(rt, job_id, keys.event_sk(2))
    assert first is not None
    assert first["kind"] == "job.requested"
    assert second is not None
    assert second["kind"] == "job.outcome_cancelled"
    assert first["at"] <= second["at"]


def test_a_page_writes_the_last_event_its_writer_left(rt: Runtime) -> None:
    api = Api(token="acme-token")
    job_id = admitted(api)
    with dying_before_event_put(rt):
        api.post(f"/jobs/{job_id}/cancel")
    assert item(rt, job_id, keys.event_sk(2)) is None
    # The job says cancelled: the page shows its terminal event with it, never without.
    response = api.get(f"/jobs/{job_id}/events")
    assert [event["type"] for event in response.body["events"]] == [
        "job.accepted",
        "job.cancelled",
    ]
    assert "next_after" not in response.body
    assert item(rt, job_id, keys.event_sk(2)) is not None


def test_a_page_that_is_not_behind_reads_no_event_item_more(rt: Runtime) -> None:
    """An empty page of unacked events (all acked) is the consumer's commonest poll: the job's
    description of its last event does not make it read that event."""
    api = Api(token="acme-token")
    job_id = admitted(api)
    page = api.get(f"/jobs/{job_id}/events").body
    ack = api.post(f"/jobs/{job_id}/events/ack", {"ack_through": page["events"][-1]["event_id"]})
    assert ack.status == 200
    calls: list[str] = []

    def count(model: Any, **_: Any) -> None:
        calls.append(model.name)

    with hooked(rt.store.client, "before-call.dynamodb", count, "calls"):
        response = api.get(f"/jobs/{job_id}/events?unacked=1")
    assert response.body["events"] == []
    assert "GetItem" not in calls


def test_the_description_keeps_what_the_job_item_does_not(rt: Runtime) -> None:
    """The job item holds the event's sequence and `at` already; its description holds the
    rest, in short names (it rides on every later write of the job item)."""
    api = Api(token="acme-token")
    job_id = admitted(api)
    api.post(f"/jobs/{job_id}/cancel")
    job = from_item(
        rt.store.client.get_item(
            TableName=rt.settings.table_name,
            Key={keys.PK: {"S": keys.job_pk(job_id)}, keys.SK: {"S": keys.JOB_SK}},
        )["Item"]
    )
    event = item(rt, job_id, keys.event_sk(2))
    assert event is not None
    assert job[keys.PENDING_EVENT] == {
        "k": "job.outcome_cancelled",
        "x": event[keys.TTL_ATTRIBUTE],
        "m": "fw",
        "b": "https://jobs.example.test",
    }
    assert (job["event_count"], job["last_event_at"]) == (2, event["at"])
