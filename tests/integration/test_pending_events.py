"""A non-terminal commit is the job's conditional write, then its event's put (store/pending.py).
A writer that dies between the two leaves the event described on the job; whoever comes next
writes it: the job's next appender before its own write, a page that finds the job ahead of its
events. Each written late is the same event (its sequence, kind and `at`), its callback watched
by the sweep, in the feed from when it was written. A terminal commit too: its job stays among the
sweep's open jobs until its event is written, and the sweep writes it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from jobstream.lifecycle.identity import derive_job_id
from jobstream.runtime import Runtime
from jobstream.service import execution, jobs
from jobstream.service import sweep as sweep_module
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.codec import from_item
from jobstream.store.jobs import JobStore
from tests.support.client_hooks import dynamodb_calls, hooked
from tests.support.dispatch import dispatch_stream
from tests.support.faults import Faults, injected
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import among_open_jobs


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


def the_job_id() -> str:
    """The job the canonical Task names (its id is derived from its key, written or not)."""
    return derive_job_id("acme", canonical_task()["idempotency_key"])


def test_an_admission_that_died_before_its_event_is_completed_by_the_claim(
    wrt: Runtime, clock: Clock
) -> None:
    api = Api(token="acme-token")
    with dying_before_event_put(wrt) as died:
        response = api.post("/jobs", canonical_task())
    assert died == [keys.event_sk(1)]
    assert response.status >= 500  # the invocation died: its client tries again
    job_id = the_job_id()
    job = wrt.store.get_job_item(job_id)
    assert job is not None
    assert job.event_count == 1
    assert job.pending_event is not None
    assert item(wrt, job_id, keys.event_sk(1)) is None
    # The client never tries again; the dispatcher hands the job to a worker.
    dispatch_stream(wrt)

    clock.advance(5_000)
    assert execution.claim(wrt, job_id, "worker-1") is not None

    first = item(wrt, job_id, keys.event_sk(1))
    assert first is not None
    assert (first["kind"], first["at"]) == ("job.requested", job.last_event_at)
    # Its callback, written late, has its own sweep entry; it enters the feed when written.
    assert first["state"] == "pending"
    assert "sweep_pk" in first
    assert first["feed_sk"] == keys.feed_sk(clock.now, job_id, 1)
    # And its job's entry under its correlation id (store/records.py `correlation_entry`).
    correlation = canonical_task()["correlation_id"]
    assert first["gsi1pk"] == keys.correlation_pk("acme", correlation)
    assert first["gsi1sk"] == keys.created_sk(job.created_at, job_id)
    dispatch_stream(wrt)
    sent = boto3.client("sqs").receive_message(
        QueueUrl=wrt.settings.callback_queue_url or "", MaxNumberOfMessages=10
    )["Messages"]
    assert sorted(json.loads(message["Body"])["sequence"] for message in sent) == [1, 2]
    assert kinds(api, job_id) == ["job.requested", "job.execution_started"]


def test_the_clients_retry_of_an_admission_that_died_before_its_event_writes_it(
    wrt: Runtime, clock: Clock
) -> None:
    """The retry, a replay, completes the admission at once: the job's first event, its
    callback and its correlation id's listing do not wait for the claim or the sweep."""
    api = Api(token="acme-token")
    with dying_before_event_put(wrt):
        assert api.post("/jobs", canonical_task()).status >= 500
    job_id = the_job_id()
    clock.advance(2_000)
    with dynamodb_calls(wrt.store.client) as calls:
        assert api.post("/jobs", canonical_task()).status == 200
    first = item(wrt, job_id, keys.event_sk(1))
    assert first is not None
    assert first["kind"] == "job.requested"
    assert first["state"] == "pending"
    assert first["feed_sk"] == keys.feed_sk(clock.now, job_id, 1)
    correlation = canonical_task()["correlation_id"]
    assert first["gsi1pk"] == keys.correlation_pk("acme", correlation)
    listed = api.get(f"/jobs?correlation_id={correlation}").body["jobs"]
    assert [job["job_id"] for job in listed] == [job_id]
    dispatch_stream(wrt)
    sent = boto3.client("sqs").receive_message(
        QueueUrl=wrt.settings.callback_queue_url or "", MaxNumberOfMessages=10
    )["Messages"]
    assert [json.loads(message["Body"])["sequence"] for message in sent] == [1]
    # A later replay finds the event written: one read of it, no write.
    with dynamodb_calls(wrt.store.client) as again:
        assert api.post("/jobs", canonical_task()).status == 200
    assert "PutItem" in calls
    assert "PutItem" not in again


def the_sweep_takes_it_off_once_its_event_is_written(
    rt: Runtime, job_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ended job whose terminal event its writer left unwritten, past the grace period: a
    sweep whose settling fails (throttled) leaves it among the open jobs; the next one writes
    the event and takes the job off."""
    with monkeypatch.context() as patch:
        patch.setattr(sweep_module, "_settle_unwritten", lambda *_: None)
        assert sweep(rt).ended_jobs_released == 0
    assert among_open_jobs(rt, job_id)
    report = sweep(rt)
    assert (report.events_settled, report.ended_jobs_released) == (1, 1)
    assert not among_open_jobs(rt, job_id)


def test_an_ended_job_covers_its_terminal_event_until_the_sweep_writes_it(
    crt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A terminal commit is two writes, as every commit: its writer dies between them, and the
    job, ended, stays among the sweep's open jobs with its description. Past the grace period
    the sweep writes the event (its callback under an entry of its own), then takes the job
    off the open jobs; nothing of it is written twice."""
    api = Api(token="acme-token")
    job_id = admitted(api)
    with dying_before_event_put(crt) as died, dynamodb_calls(crt.store.client) as calls:
        assert api.post(f"/jobs/{job_id}/cancel").status >= 500
    assert died == [keys.event_sk(2)]
    assert "TransactWriteItems" not in calls
    job = crt.store.get_job_item(job_id)
    assert job is not None
    assert job.status == "cancelled"
    assert job.pending_event is not None
    assert item(crt, job_id, keys.event_sk(2)) is None
    assert among_open_jobs(crt, job_id)

    clock.advance(keys.HANDOFF_GRACE_MS - 1)
    assert sweep(crt).events_settled == 0  # its writer may still be on its way
    clock.advance(2)
    the_sweep_takes_it_off_once_its_event_is_written(crt, job_id, monkeypatch)
    cancelled = item(crt, job_id, keys.event_sk(2))
    assert cancelled is not None
    assert cancelled["kind"] == "job.outcome_cancelled"
    assert "sweep_pk" in cancelled  # watched: its job no longer covers it
    after = item(crt, job_id, keys.JOB_SK) or {}
    assert "sweep_pk" not in after
    assert keys.PENDING_EVENT not in after
    assert sweep(crt).events_settled == 0


def test_an_ended_job_without_a_callback_leaves_the_open_jobs_once_its_event_is_written(
    crt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No callback to wait for, the job still waits for its terminal event: its writer died
    before the put, and the sweep takes the job off only once the event is written."""
    api = Api(token="acme-token")
    response = api.post("/jobs", canonical_task(callback_url=None))
    assert response.status == 202, response.body
    job_id = str(response.body["job"]["job_id"])
    with dying_before_event_put(crt) as died:
        assert api.post(f"/jobs/{job_id}/cancel").status >= 500
    assert died == [keys.event_sk(2)]
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    the_sweep_takes_it_off_once_its_event_is_written(crt, job_id, monkeypatch)
    assert item(crt, job_id, keys.event_sk(2)) is not None
    assert not among_open_jobs(crt, job_id)


def test_a_terminal_commit_for_the_release_before_is_one_transaction(crt: Runtime) -> None:
    """The first step of an upgrade (`previous_formats`): the release before takes an ended
    job for done, so its event is put in the same transaction as its job's update, which takes
    the job off the open jobs and drops its description."""
    compatible = replace(
        crt,
        store=JobStore(crt.store.table_name, crt.store.client_factory, previous_formats=True),
    )
    api = Api(token="acme-token")
    job_id = admitted(api)
    with (
        dying_before_event_put(compatible) as died,
        dynamodb_calls(compatible.store.client) as calls,
    ):
        jobs.cancel(compatible, "acme", job_id, None)
    assert died == []
    assert "TransactWriteItems" in calls
    assert "PutItem" not in calls
    job = compatible.store.get_job_item(job_id)
    assert job is not None
    assert job.status == "cancelled"
    assert job.pending_event is None
    assert not among_open_jobs(crt, job_id)
    cancelled = item(crt, job_id, keys.event_sk(2))
    assert cancelled is not None
    assert cancelled["kind"] == "job.outcome_cancelled"
    assert "sweep_pk" in cancelled  # its terminal callback covers itself


def test_the_next_appender_writes_the_event_before_its_own(rt: Runtime) -> None:
    api = Api(token="acme-token")
    with dying_before_event_put(rt):
        api.post("/jobs", canonical_task())
    job_id = the_job_id()
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
    with dying_before_event_put(rt):
        api.post("/jobs", canonical_task())
    job_id = the_job_id()
    assert item(rt, job_id, keys.event_sk(1)) is None
    # The job is admitted: its page shows its first event, never an empty stream (I1).
    response = api.get(f"/jobs/{job_id}/events")
    assert [event["type"] for event in response.body["events"]] == ["job.accepted"]
    assert "next_after" not in response.body
    assert item(rt, job_id, keys.event_sk(1)) is not None


def test_a_page_that_is_not_behind_reads_no_event_item_more(rt: Runtime) -> None:
    """An empty page of unacked events (all acked) is the consumer's commonest poll: the job's
    description of its last event does not make it read that event."""
    api = Api(token="acme-token")
    job_id = admitted(api)
    page = api.get(f"/jobs/{job_id}/events").body
    ack = api.post(f"/jobs/{job_id}/events/ack", {"ack_through": page["events"][-1]["event_id"]})
    assert ack.status == 200
    with dynamodb_calls(rt.store.client) as calls:
        response = api.get(f"/jobs/{job_id}/events?unacked=1")
    assert response.body["events"] == []
    assert "GetItem" not in calls


def test_the_description_keeps_what_the_job_item_does_not(rt: Runtime) -> None:
    """The job item holds the event's sequence and `at` already; its description holds the
    rest, in short names (it rides on every later write of the job item)."""
    api = Api(token="acme-token")
    job_id = admitted(api)
    job = from_item(
        rt.store.client.get_item(
            TableName=rt.settings.table_name,
            Key={keys.PK: {"S": keys.job_pk(job_id)}, keys.SK: {"S": keys.JOB_SK}},
        )["Item"]
    )
    event = item(rt, job_id, keys.event_sk(1))
    assert event is not None
    assert job[keys.PENDING_EVENT] == {
        "k": "job.requested",
        "x": event[keys.TTL_ATTRIBUTE],
        "m": "fu",
        "b": "https://jobs.example.test",
    }
    assert (job["event_count"], job["last_event_at"]) == (1, event["at"])


def test_the_sweep_writes_an_open_jobs_event_once_the_hand_off_grace_has_passed(
    wrt: Runtime, clock: Clock
) -> None:
    """A queued job may wait long for its next commit (a busy resource): the sweep writes the
    event its admission died before writing, with its callback, a grace after it, and leaves a
    live writer's few milliseconds alone."""
    api = Api(token="acme-token")
    with dying_before_event_put(wrt):
        api.post("/jobs", canonical_task())
    job_id = the_job_id()
    with dynamodb_calls(wrt.store.client) as calls:
        early = sweep(wrt)
    assert early.events_settled == 0
    assert "PutItem" not in calls
    assert item(wrt, job_id, keys.event_sk(1)) is None

    clock.advance(keys.HANDOFF_GRACE_MS)
    assert sweep(wrt).events_settled == 1
    first = item(wrt, job_id, keys.event_sk(1))
    assert first is not None
    assert first["kind"] == "job.requested"
    assert "sweep_pk" in first
    # Nothing left: the next sweep reads the event and writes nothing.
    assert sweep(wrt).events_settled == 0


@pytest.mark.parametrize("after", [True, False])
def test_a_commit_whose_answer_was_lost_is_its_own_when_its_retry_is_refused(
    rt: Runtime, *, after: bool
) -> None:
    """A single write carries no request token: the claim's update applied, its answer lost,
    the retry refused by that very write. The job shows the claim's own lease owner, count,
    `at` and description: the claim holds the job and puts its event. A refusal the job does
    not show as its own (another claim won) stays a lost race."""
    api = Api(token="acme-token")
    job_id = admitted(api)
    if not after:
        # Another invocation claimed first: its lease owner is not this claim's.
        assert execution.claim(rt, job_id, "worker-0") is not None
    faults = Faults(kinds=("internal",), mode="after", at=1, matching=keys.PENDING_EVENT)
    with injected(faults):
        claimed = execution.claim(rt, job_id, "worker-1")
    job = rt.store.get_job_item(job_id)
    assert job is not None
    started = item(rt, job_id, keys.event_sk(2))
    assert started is not None
    assert started["kind"] == "job.execution_started"
    if after:
        assert faults.fired == 1
        assert claimed is not None
        assert job.lease_owner == claimed.lease_owner
        assert job.attempt == 1
    else:
        assert claimed is None
        assert job.attempt == 1


def test_a_failed_settle_leaves_the_sweeps_pass_going(
    wrt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep's read of open jobs' last events fails past its retries: counted in `errors`,
    and the pass over open jobs goes on (each job still checked); the next sweep writes it."""
    api = Api(token="acme-token")
    with dying_before_event_put(wrt):
        api.post("/jobs", canonical_task())
    job_id = the_job_id()
    clock.advance(keys.HANDOFF_GRACE_MS)

    def throttled(records: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
            "BatchGetItem",
        )

    with monkeypatch.context() as patched:
        patched.setattr(wrt.store, "unwritten_events", throttled)
        report = sweep(wrt)
    assert report.errors == 1
    assert report.jobs_checked == 1
    assert item(wrt, job_id, keys.event_sk(1)) is None
    assert sweep(wrt).events_settled == 1
