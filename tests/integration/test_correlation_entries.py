"""A correlation id's listing (`GET /jobs?correlation_id=`) lists a job under its first
event's entry in `tenant_jobs` (its keys only, written once with the event), not under its job
item's in `by_correlation`, which held its status and so was written again at its start and at
its end: 2 write units a job. The jobs the release before admitted (their entries on their job
items) are listed with the others, newest first, and the first step of an upgrade still writes
what that release reads."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jobstream.domain import IntentRef
from jobstream.runtime import Runtime
from jobstream.service import admission, execution, jobs
from jobstream.store import keys
from jobstream.store.jobs import JobStore
from jobstream.store.records import job_key, part_key
from tests.integration.test_execution import submit
from tests.integration.test_pending_events import CrashError, dying_before_event_put
from tests.integration.test_sweep_shards import kill
from tests.support.harness import Clock, canonical_task
from tests.support.validation import validate

CHAIN = "review-chain:7"
NEXT_CHAIN = "review-chain:8"


@pytest.fixture
def compatible(rt: Runtime) -> Runtime:
    """The runtime of the first step of an upgrade (PreviousReleaseCompatible): it admits
    jobs as the release before did, their entries on their job items."""
    return replace(
        rt, store=JobStore(rt.store.table_name, rt.store.client_factory, previous_formats=True)
    )


def entries(rt: Runtime, index: str, pk_name: str) -> list[dict[str, Any]]:
    """The index entries under the correlation id's partition key."""
    answer = rt.store.client.query(
        TableName=rt.store.table_name,
        IndexName=index,
        KeyConditionExpression="#p = :p",
        ExpressionAttributeNames={"#p": pk_name},
        ExpressionAttributeValues={":p": {"S": keys.correlation_pk("acme", CHAIN)}},
    )
    found: list[dict[str, Any]] = answer["Items"]
    return found


def item(rt: Runtime, key: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = rt.store.client.get_item(
        TableName=rt.store.table_name, Key=key, ConsistentRead=True
    )["Item"]
    return found


def listed(rt: Runtime, **filters: str) -> list[str]:
    """The job ids a correlation id's listing shows, a page of one job at a time."""
    query = {"correlation_id": [CHAIN], "limit": ["1"], **{k: [v] for k, v in filters.items()}}
    shown: list[str] = []
    for _ in range(20):
        page = jobs.list_jobs(rt, "acme", query, None)
        validate(page, "JobPage")
        for job in page["jobs"]:
            assert job == jobs.get_job(rt, "acme", job["job_id"], None)
        shown += [job["job_id"] for job in page["jobs"]]
        if "next_cursor" not in page:
            return shown
        query["cursor"] = [page["next_cursor"]]
    raise AssertionError("the listing never ended")


def test_a_job_is_listed_under_its_first_events_entry_written_once(
    rt: Runtime, clock: Clock
) -> None:
    status, body = admission.submit(
        rt, "acme", canonical_task(idempotency_key="chained", correlation_id=CHAIN), None
    )
    assert status == 202
    job_id = body["job"]["job_id"]
    clock.advance(5)
    assert execution.execute(rt, job_id) == "succeeded"
    # Its first event's callback dies: the tenant's dead list's entry (`by_correlation`) on
    # the same item leaves the correlation entry as it was.
    kill(rt, IntentRef(job_id, 1), clock.now)
    dead, _ = rt.callbacks.of_tenant("acme", keys.TenantCallbacks.DEAD, start=None, limit=10)
    assert [callback.ref for callback in dead] == [IntentRef(job_id, 1)]
    # Nothing on the job item: its claim and its end wrote no correlation entry.
    assert "gsi2pk" not in item(rt, job_key(job_id))
    assert entries(rt, keys.CORRELATION_INDEX, "gsi2pk") == []
    (entry,) = entries(rt, keys.TENANT_INDEX, "gsi1pk")
    assert entry[keys.SK]["S"] == keys.event_sk(1)
    assert set(entry) == {keys.PK, keys.SK, "gsi1pk", "gsi1sk"}  # the event's item projects none
    # Listed as the job shows, the status filter applied once the job is read; no tenant's
    # listing shows the entry.
    assert listed(rt) == [job_id]
    assert listed(rt, status="succeeded") == [job_id]
    assert listed(rt, status="queued") == []
    tenant_page = jobs.list_jobs(rt, "acme", {"limit": ["100"]}, None)
    assert [job["job_id"] for job in tenant_page["jobs"]] == [job_id]


def test_a_job_without_a_correlation_id_has_no_entry(rt: Runtime) -> None:
    job_id = submit(rt, "alone", correlation_id=None)
    first = item(rt, part_key(job_id, keys.event_sk(1)))
    assert "gsi1pk" not in first
    assert "gsi2pk" not in item(rt, job_key(job_id))


def test_the_release_befores_jobs_are_listed_with_the_others_newest_first(
    rt: Runtime, compatible: Runtime, clock: Clock
) -> None:
    admitted: list[str] = []
    for runtime, key in ((compatible, "before-0"), (compatible, "before-1"), (rt, "after-0")):
        admitted.append(submit(runtime, key, correlation_id=CHAIN))
        clock.advance(5)  # one job a moment: newest first is the order below
    admitted.append(submit(rt, "after-1", correlation_id=CHAIN))
    before, after = admitted[:2], admitted[2:]
    # The first step of an upgrade writes the entry where the release before reads it (and
    # its first event's too, whichever process writes that event): listed once all the same.
    assert item(rt, job_key(before[0]))["gsi2pk"]["S"] == keys.correlation_pk("acme", CHAIN)
    assert "gsi1pk" in item(rt, part_key(before[0], keys.event_sk(1)))
    assert execution.execute(rt, before[1]) == "succeeded"
    assert execution.execute(rt, after[0]) == "succeeded"
    newest_first = [after[1], after[0], before[1], before[0]]
    for runtime in (rt, compatible):
        assert listed(runtime) == newest_first
        assert listed(runtime, status="succeeded") == [after[0], before[1]]
        assert listed(runtime, status="queued") == [after[1], before[0]]


def test_a_key_admitted_again_is_not_listed_under_its_earlier_jobs_correlation_id(
    rt: Runtime, clock: Clock
) -> None:
    """Past its retention a key names a new job, whose first event replaces the earlier job's
    (and its entry) only when written: an admission that died before it leaves the earlier
    entry in place, which lists no job (its sort key is not the new job's) until it is."""
    job_id = submit(rt, "again", correlation_id=CHAIN)
    assert execution.execute(rt, job_id) == "succeeded"
    clock.advance(31 * 86_400_000)  # past its 30 days of retention: the key is free
    with dying_before_event_put(rt) as died, pytest.raises(CrashError):
        submit(rt, "again", correlation_id=NEXT_CHAIN)
    assert died == [keys.event_sk(1)]
    assert item(rt, part_key(job_id, keys.event_sk(1)))["gsi1pk"]["S"] == keys.correlation_pk(
        "acme", CHAIN
    )
    assert listed(rt) == []
    # Its client's retry (a replay) writes its first event: listed under its correlation id.
    task = canonical_task(idempotency_key="again", callback_url=None, correlation_id=NEXT_CHAIN)
    task["params"] = {"query": {"tags": ["botefuku"]}}
    assert admission.submit(rt, "acme", task, None)[0] == 200
    assert listed(rt) == []
    query = {"correlation_id": [NEXT_CHAIN]}
    assert [job["job_id"] for job in jobs.list_jobs(rt, "acme", query, None)["jobs"]] == [job_id]
