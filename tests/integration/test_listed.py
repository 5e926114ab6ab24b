"""A listing shows every job exactly as `GET /jobs/{id}` does, reading the tenant's index alone
for queued and finished jobs (store/listed.py): the listing map each write keeps, a small
result's own entry, and what is read from the table instead (a running job, a large result, an
entry written before the map existed, a result entry a cursor stopped on)."""

from __future__ import annotations

import json
import secrets
from dataclasses import replace
from typing import Any

import pytest

from jobstream.jobtypes.runner import Outcome
from jobstream.runtime import Runtime
from jobstream.service import execution, jobs
from jobstream.service.completion import complete
from jobstream.service.sweep import sweep
from jobstream.store import keys, listed, results
from jobstream.store.codec import to_item
from jobstream.store.jobs import JobStore
from jobstream.store.ports import JobQuery
from jobstream.store.records import job_key, part_key
from jobstream.store.shards import ReadBudget
from tests.integration.test_execution import submit
from tests.support.client_hooks import dynamodb_calls
from tests.support.harness import Clock
from tests.support.validation import validate

TABLE_READS = {"BatchGetItem", "GetItem"}


def listed_documents(rt: Runtime) -> dict[str, dict[str, Any]]:
    """Every job of the tenant as its listing shows it, page after page."""
    shown: dict[str, dict[str, Any]] = {}
    query: dict[str, list[str]] = {"limit": ["100"]}
    for _ in range(50):
        page = jobs.list_jobs(rt, "acme", query, None)
        validate(page, "JobPage")
        shown |= {job["job_id"]: job for job in page["jobs"]}
        if "next_cursor" not in page:
            return shown
        query = {"limit": ["100"], "cursor": [page["next_cursor"]]}
    raise AssertionError("the listing never ended")


def assert_listed_as_got(rt: Runtime, job_ids: list[str]) -> None:
    shown = listed_documents(rt)
    for job_id in job_ids:
        assert shown[job_id] == jobs.get_job(rt, "acme", job_id, None), job_id


def item(rt: Runtime, key: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = rt.store.client.get_item(
        TableName=rt.store.table_name, Key=key, ConsistentRead=True
    )["Item"]
    return found


def test_every_state_lists_as_the_job_shows_it(rt: Runtime, clock: Clock) -> None:
    queued = submit(rt, "queued", correlation_id="c-1", labels={"": "empty key", "k": "v"})
    waiting = submit(rt, "waiting")
    waiting_record = rt.store.get_job_item(waiting)
    assert waiting_record is not None
    assert rt.store.note_waiting(
        waiting_record,
        stage="slot_wait",
        message="waiting for a slot of acct (1 at a time)",
        now=clock(),
    )
    running = submit(rt, "running")
    assert execution.claim(rt, running, "worker-1") is not None
    succeeded = submit(rt, "succeeded")
    clock.advance(10)
    assert execution.execute(rt, succeeded) == "succeeded"
    cancelled_queued = submit(rt, "cancelled-queued")
    cancelled_running = submit(rt, "cancelled-running")
    assert execution.claim(rt, cancelled_running, "worker-2") is not None
    clock.advance(10)
    rt.store.renew_lease(cancelled_running, "worker-2", now=clock(), lease_ms=180_000)
    clock.advance(10)
    for job_id in (cancelled_queued, cancelled_running):
        jobs.cancel(rt, "acme", job_id, None)
    every = [queued, waiting, running, succeeded, cancelled_queued, cancelled_running]
    assert_listed_as_got(rt, every)
    # A queued job past its queue budget expires at the sweep.
    clock.advance(rt.settings.queued_timeout_ms + 1)
    sweep(rt)
    assert jobs.get_job(rt, "acme", queued, None)["status"] == "expired"
    assert_listed_as_got(rt, every)


def test_a_page_of_jobs_not_running_reads_the_index_alone(rt: Runtime, clock: Clock) -> None:
    ids = [submit(rt, f"job-{index}") for index in range(6)]
    for job_id in ids[:3]:
        clock.advance(5)
        assert execution.execute(rt, job_id) == "succeeded"
    jobs.cancel(rt, "acme", ids[3], None)
    with dynamodb_calls(rt.store.client) as calls:
        page = jobs.list_jobs(rt, "acme", {}, None)
    assert set(calls) == {"Query"}
    assert {job["job_id"] for job in page["jobs"]} == set(ids)
    results_shown = [job["result"] for job in page["jobs"] if job["status"] == "succeeded"]
    assert len(results_shown) == 3
    assert all(result["candidates"] for result in results_shown)
    assert_listed_as_got(rt, ids)


def test_the_claim_removes_the_map_and_a_heartbeat_leaves_the_index_alone(
    rt: Runtime, clock: Clock
) -> None:
    job_id = submit(rt, "beats")
    assert listed.ATTRIBUTE in item(rt, job_key(job_id))
    assert execution.claim(rt, job_id, "worker-1") is not None
    assert listed.ATTRIBUTE not in item(rt, job_key(job_id))
    clock.advance(30_000)
    assert rt.store.renew_lease(job_id, "worker-1", now=clock(), lease_ms=180_000)
    # The entry still says running (its job is read from the table) and holds no map.
    entries = rt.store.client.query(
        TableName=rt.store.table_name,
        IndexName=keys.TENANT_INDEX,
        KeyConditionExpression="gsi1pk = :p",
        ExpressionAttributeValues=to_item({":p": keys.job_tenant_pk("acme", job_id)}),
    )["Items"]
    (entry,) = [entry for entry in entries if entry[keys.PK]["S"] == keys.job_pk(job_id)]
    assert entry["status"]["S"] == "running"
    assert listed.ATTRIBUTE not in entry
    assert "heartbeat_at" not in entry  # a heartbeat rewrites nothing the index holds
    assert_listed_as_got(rt, [job_id])


def test_a_heartbeat_racing_the_terminal_commit_makes_it_read_the_job_again(
    rt: Runtime, clock: Clock
) -> None:
    """The cancel read the job before the worker's heartbeat landed: the map it would write
    shows a heartbeat the job no longer has, so its commit does not hold; read again, the
    job ends with the heartbeat it had, and its listing shows it."""
    job_id = submit(rt, "raced")
    assert execution.claim(rt, job_id, "worker-1") is not None
    beats: list[int] = []

    def heartbeat_first(**_: Any) -> None:
        # Just before the commit's first attempt is sent (a hook sees every attempt).
        if not beats:
            beats.append(clock.advance(1_000))
            assert rt.store.renew_lease(job_id, "worker-1", now=clock(), lease_ms=180_000)

    events = rt.store.client.meta.events
    events.register("before-call.dynamodb.UpdateItem", heartbeat_first)
    try:
        jobs.cancel(rt, "acme", job_id, None)
    finally:
        events.unregister("before-call.dynamodb.UpdateItem", heartbeat_first)
    after = rt.store.get_job_item(job_id)
    assert after is not None
    assert after.status == "cancelled"
    assert after.heartbeat_at == beats[0]  # the later heartbeat, not the one first read
    assert_listed_as_got(rt, [job_id])


def test_a_take_over_racing_an_expiry_is_not_undone(rt: Runtime, clock: Clock) -> None:
    """A deadline verdict read the job before another worker took it over (a take-over
    writes no event): the attempt it shows is never set back by the verdict's commit."""
    job_id = submit(rt, "taken")
    assert execution.claim(rt, job_id, "worker-1") is not None
    seen = rt.store.get_job_item(job_id)
    assert seen is not None
    clock.advance(rt.settings.lease_ms + 1)
    taken = execution.claim(rt, job_id, "worker-2")
    assert taken is not None
    assert taken.attempt == 2
    # The sweep's verdict, from what it read before the take-over.
    clock.advance(rt.settings.default_deadline_ms)
    from jobstream.lifecycle import transitions
    from jobstream.lifecycle.log import apply_until_settled
    from jobstream.protocol.errors import Reason

    apply_until_settled(
        rt,
        seen,
        lambda current: transitions.expire(current, Reason.EXECUTION_TIMEOUT, now=clock()),
        reread=lambda job, _: rt.store.get_job_item(job),
        attempts=3,
        base_url=None,
    )
    after = rt.store.get_job_item(job_id)
    assert after is not None
    assert after.status == "expired"
    assert after.attempt == 2
    assert_listed_as_got(rt, [job_id])


def test_a_wait_for_a_slot_keeps_what_the_map_says_of_the_labels(rt: Runtime, clock: Clock) -> None:
    small = submit(rt, "waits-small", labels={"k": "v"})
    large = submit(rt, "waits-large", labels={"note": "x" * 2_000})
    for job_id in (small, large):
        record = rt.store.get_job_item(job_id)
        assert record is not None
        clock.advance(5)
        assert rt.store.note_waiting(record, stage="slot_wait", message="waiting", now=clock())
    assert_listed_as_got(rt, [small, large])
    assert listed_documents(rt)[large]["labels"] == {"note": "x" * 2_000}
    jobs.cancel(rt, "acme", small, None)
    assert_listed_as_got(rt, [small, large])


def test_a_failed_job_lists_as_it_shows(rt: Runtime, clock: Clock) -> None:
    job_id = submit(rt, "fails")
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=job_key(job_id),
        UpdateExpression="SET params_canonical = :p",
        ExpressionAttributeValues=to_item({":p": '{"query":{"tags":["no-such-tag-anywhere"]}}'}),
    )
    clock.advance(5)
    assert execution.execute(rt, job_id) == "failed"
    shown = listed_documents(rt)[job_id]
    assert shown["error"]["code"] == "no_candidate"
    assert_listed_as_got(rt, [job_id])


def test_a_map_written_for_another_status_is_not_trusted(rt: Runtime, clock: Clock) -> None:
    """A writer that moves the status without the map (the release before, during an
    upgrade) leaves one the listing does not show."""
    job_id = submit(rt, "moved")
    clock.advance(5)
    assert execution.execute(rt, job_id) == "succeeded"
    stale = {"t": "queued", "u": 1}
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=job_key(job_id),
        UpdateExpression="SET #listed = :listed",
        ExpressionAttributeNames={"#listed": listed.ATTRIBUTE},
        ExpressionAttributeValues=to_item({":listed": stale}),
    )
    with dynamodb_calls(rt.store.client) as calls:
        assert_listed_as_got(rt, [job_id])
    assert "BatchGetItem" in calls


def test_the_first_step_of_an_upgrade_writes_what_the_release_before_reads(
    rt: Runtime, clock: Clock
) -> None:
    compatible = replace(
        rt, store=JobStore(rt.store.table_name, rt.store.client_factory, previous_formats=True)
    )
    big = {"note": "x" * 2_000}
    job_id = submit(compatible, "compatible", labels=big)
    clock.advance(5)
    assert execution.execute(compatible, job_id) == "succeeded"
    job_item = item(rt, job_key(job_id))
    assert json.loads(job_item["labels"]["S"]) == big
    assert listed.UNLISTED_LABELS not in job_item
    result_item = item(rt, part_key(job_id, keys.RESULT_SK))
    assert set(result_item[results.ATTRIBUTE]) == {"M"}  # a map, as it was
    assert "gsi1pk" not in result_item  # no entry the release before would list as a job
    for runtime in (compatible, rt):
        assert listed_documents(runtime)[job_id] == jobs.get_job(runtime, "acme", job_id, None)


def test_a_large_result_is_read_from_the_table(rt: Runtime, clock: Clock) -> None:
    small, large = submit(rt, "small"), submit(rt, "large")
    for job_id in (small, large):
        assert execution.claim(rt, job_id, "worker-1") is not None
    noise = secrets.token_hex(1_500)  # random: compressed, still over 1 KB
    candidate = {"candidate_id": "pixiv:1", "platform": "pixiv", "work_id": "1"}
    stored = {
        small: {"candidates": [], "scanned": 1},
        large: {
            "candidates": [{**candidate, "work_type": "novel", "metadata": {"note": noise}}],
            "scanned": 1,
        },
    }
    for job_id, result in stored.items():
        record = rt.store.get_job_item(job_id)
        assert record is not None
        assert rt.store.put_result(record, result, expires_at=2_000_000_000)
    assert "gsi1pk" in item(rt, part_key(small, keys.RESULT_SK))
    assert "gsi1pk" not in item(rt, part_key(large, keys.RESULT_SK))
    # Written before the completion: a running job's result is shown by no listing.
    running = listed_documents(rt)
    assert "result" not in running[small]
    assert "result" not in running[large]
    for job_id in (small, large):
        record = rt.store.get_job_item(job_id)
        assert record is not None
        clock.advance(5)
        outcome = Outcome(result=stored[job_id])
        assert complete(rt, record, "worker-1", outcome, result_stored=True) == "succeeded"
    with dynamodb_calls(rt.store.client) as calls:
        shown = listed_documents(rt)
    assert calls.count("BatchGetItem") == 1  # the large result's item, the only one read
    assert shown[large]["result"] == stored[large]
    assert shown[small]["result"] == stored[small]
    assert_listed_as_got(rt, [small, large])


def test_an_entry_written_before_the_map_existed_is_read_from_the_table(
    rt: Runtime, clock: Clock
) -> None:
    job_id = submit(rt, "before")
    clock.advance(5)
    assert execution.execute(rt, job_id) == "succeeded"
    for key in (job_key(job_id), part_key(job_id, keys.RESULT_SK)):
        rt.store.client.update_item(
            TableName=rt.store.table_name,
            Key=key,
            UpdateExpression="REMOVE listed, gsi1pk, gsi1sk"
            if key[keys.SK]["S"] == keys.RESULT_SK
            else "REMOVE listed",
        )
    # ... its result kept as a map, as results were.
    result = jobs.get_job(rt, "acme", job_id, None)["result"]
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=part_key(job_id, keys.RESULT_SK),
        UpdateExpression="SET #r = :r",
        ExpressionAttributeNames={"#r": results.ATTRIBUTE},
        ExpressionAttributeValues=to_item({":r": result}),
    )
    with dynamodb_calls(rt.store.client) as calls:
        shown = listed_documents(rt)
    assert TABLE_READS & set(calls)
    assert shown[job_id]["result"] == result
    assert_listed_as_got(rt, [job_id])


def test_a_result_is_kept_compressed(rt: Runtime) -> None:
    job_id = submit(rt, "compressed")
    assert execution.execute(rt, job_id) == "succeeded"
    stored = item(rt, part_key(job_id, keys.RESULT_SK))[results.ATTRIBUTE]
    assert set(stored) == {"B"}
    shown = jobs.get_job(rt, "acme", job_id, None)["result"]
    assert results.from_result_attribute(stored) == shown
    assert len(stored["B"]) < len(json.dumps(shown)) / 2


def test_a_cursor_stopped_on_a_result_entry_shows_the_job_with_its_result_next(
    rt: Runtime,
) -> None:
    job_id = submit(rt, "cut")
    assert execution.execute(rt, job_id) == "succeeded"
    # One entry of each shard: the job's shard holds its result's entry first (newest first).
    one_each = ReadBudget(queries=keys.TENANT_SHARDS, items=keys.TENANT_SHARDS)
    first = rt.store.iter_jobs(JobQuery("acme", budget=one_each))
    assert list(first) == []
    assert first.resume_key is not None
    assert first.resume_key[keys.SK] == keys.RESULT_SK
    second = list(rt.store.iter_jobs(JobQuery("acme", start_key=first.resume_key)))
    assert [job.record.job_id for job in second] == [job_id]
    assert second[0].record.result == jobs.get_job(rt, "acme", job_id, None)["result"]


@pytest.mark.parametrize("status", ["queued", "succeeded", "cancelled"])
def test_a_status_filter_pairs_results_with_their_jobs(
    rt: Runtime, clock: Clock, status: str
) -> None:
    ids = [submit(rt, f"f-{index}") for index in range(4)]
    clock.advance(5)
    assert execution.execute(rt, ids[0]) == "succeeded"
    assert execution.execute(rt, ids[1]) == "succeeded"
    jobs.cancel(rt, "acme", ids[2], None)
    page = jobs.list_jobs(rt, "acme", {"status": [status]}, None)
    expected = {"queued": [ids[3]], "succeeded": ids[:2], "cancelled": [ids[2]]}[status]
    assert sorted(job["job_id"] for job in page["jobs"]) == sorted(expected)
    for job in page["jobs"]:
        assert job == jobs.get_job(rt, "acme", job["job_id"], None)


def test_labels_too_large_for_the_index_are_read_from_the_table(rt: Runtime) -> None:
    small = submit(rt, "small-labels", labels={"k": "v"})
    large = submit(rt, "large-labels", labels={"note": "x" * 2_000, "": "empty key"})
    assert "labels" in item(rt, job_key(small))
    stored = item(rt, job_key(large))
    assert "labels" not in stored
    assert listed.UNLISTED_LABELS in stored
    with dynamodb_calls(rt.store.client) as calls:
        shown = listed_documents(rt)
    assert calls.count("BatchGetItem") == 1  # the large labels' job alone
    assert shown[large]["labels"] == {"note": "x" * 2_000, "": "empty key"}
    assert_listed_as_got(rt, [small, large])


def test_a_result_entry_whose_job_is_gone_goes_to_no_other_job(rt: Runtime, clock: Clock) -> None:
    """Retention deletes a job's items one by one: a result entry may outlive its job's."""
    older = submit(rt, "older")
    clock.advance(5)
    assert execution.execute(rt, older) == "succeeded"
    clock.advance(5)
    newer = submit(rt, "newer")
    clock.advance(5)
    assert execution.execute(rt, newer) == "succeeded"
    # Both on one shard, the older's result without an entry (as a large one is): the newer's
    # result entry comes just before the older's job entry.
    for job_id, sort_key in ((older, keys.JOB_SK), (newer, keys.JOB_SK), (newer, keys.RESULT_SK)):
        rt.store.client.update_item(
            TableName=rt.store.table_name,
            Key=part_key(job_id, sort_key),
            UpdateExpression="SET gsi1pk = :p",
            ExpressionAttributeValues=to_item({":p": keys.job_tenant_pk("acme", older)}),
        )
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=part_key(older, keys.RESULT_SK),
        UpdateExpression="REMOVE gsi1pk, gsi1sk",
    )
    older_result = jobs.get_job(rt, "acme", older, None)["result"]
    rt.store.client.delete_item(TableName=rt.store.table_name, Key=job_key(newer))
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=part_key(newer, keys.RESULT_SK),
        UpdateExpression="SET #r = :r",
        ExpressionAttributeNames={"#r": results.ATTRIBUTE},
        ExpressionAttributeValues={":r": results.to_result_attribute({"candidates": []})},
    )
    shown = listed_documents(rt)
    assert set(shown) == {older}
    assert shown[older]["result"] == older_result


def test_a_run_that_heartbeats_completes_in_one_commit(rt: Runtime, clock: Clock) -> None:
    """The worker knows the heartbeats it wrote: its completion holds at its first try."""
    job_id = submit(rt, "beating")
    claimed = execution.claim(rt, job_id, "worker-1")
    assert claimed is not None
    lease = execution.Lease(rt, claimed, "worker-1")
    for _ in range(3):
        clock.advance(rt.settings.heartbeat_interval_ms)
        assert lease.beat()
    result = {"candidates": [], "scanned": 0}
    record = rt.store.get_job_item(job_id)
    assert record is not None
    assert rt.store.put_result(record, result, expires_at=2_000_000_000)
    with dynamodb_calls(rt.store.client) as calls:
        outcome = Outcome(result=result)
        assert complete(rt, lease.record, "worker-1", outcome, result_stored=True) == "succeeded"
    # The job's update, its event, its leaving the open jobs (it has no callback): no retry.
    assert calls == ["UpdateItem", "PutItem", "UpdateItem"]
    after = rt.store.get_job_item(job_id)
    assert after is not None
    assert after.heartbeat_at == clock()
    assert_listed_as_got(rt, [job_id])


def test_a_deadline_verdict_lands_past_a_heartbeat_that_raced_it(rt: Runtime, clock: Clock) -> None:
    """The sweep read the job, then its worker's heartbeat landed: the verdict's commit does
    not hold, and the job, judged again as it is now, still ends past its deadline."""
    from jobstream.protocol.errors import Reason
    from jobstream.service import liveness

    job_id = submit(rt, "deadline")
    assert execution.claim(rt, job_id, "worker-1") is not None
    seen = rt.store.get_job_item(job_id)
    assert seen is not None
    assert seen.deadline_at is not None
    clock.now = seen.deadline_at + 1
    assert liveness.verdict(seen, clock(), rt.settings) is Reason.EXECUTION_TIMEOUT
    assert rt.store.renew_lease(job_id, "worker-1", now=clock(), lease_ms=180_000)
    expired = liveness.expire(rt, seen, Reason.EXECUTION_TIMEOUT, clock())
    assert expired is not None
    assert expired.status == "expired"
    assert expired.heartbeat_at == clock()  # the heartbeat that raced it, kept
    assert_listed_as_got(rt, [job_id])


def test_large_labels_stay_shown_whichever_formats_the_writers_use(
    rt: Runtime, clock: Clock
) -> None:
    """The second step of an upgrade rolling out: a job admitted by new code, cancelled by a
    function still writing the previous formats (and the other way round)."""
    compatible = replace(
        rt, store=JobStore(rt.store.table_name, rt.store.client_factory, previous_formats=True)
    )
    big = {"note": "x" * 2_000}
    new_first = submit(rt, "new-first", labels=big)
    old_first = submit(compatible, "old-first", labels=big)
    clock.advance(5)
    jobs.cancel(compatible, "acme", new_first, None)
    jobs.cancel(rt, "acme", old_first, None)
    for runtime in (rt, compatible):
        shown = listed_documents(runtime)
        assert shown[new_first]["labels"] == big
        assert shown[old_first]["labels"] == big
    assert_listed_as_got(rt, [new_first, old_first])
