"""Write sharding (issue 13 item 10, docs/capacity.md): no constant partition key takes every
open job, pending callback or tenant's job; readers see the shards as one key, in one order."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jobstream.domain import IntentRef, JobRecord
from jobstream.lifecycle.identity import derive_job_id
from jobstream.runtime import Runtime
from jobstream.service import admission, execution
from jobstream.service import sweep as sweep_module
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.codec import to_item
from jobstream.store.listing import JobQuery
from jobstream.store.shards import ReadBudget
from jobstream.store.sweep_index import sweep_entries
from jobstream.tenant_names import is_tenant_name
from tests.support.harness import Clock, canonical_task
from tests.support.state import whole_table


def submit(rt: Runtime, key: str, **overrides: Any) -> str:
    status, body = admission.submit(
        rt, "acme", canonical_task(idempotency_key=key, **overrides), None
    )
    assert status == 202
    job_id: str = body["job"]["job_id"]
    return job_id


def submit_watched(rt: Runtime, key: str) -> str:
    """A job whose accepted callback has an entry of its own in the sweep index, due a grace
    period after its event (as a failed attempt or a hand-over gives it)."""
    job_id = submit(rt, key, callback_url="https://consumer.example.test/hooks")
    accepted = rt.callbacks.get(IntentRef(job_id, 1))
    assert accepted is not None
    due = accepted.created_at + keys.HANDOFF_GRACE_MS
    assert rt.callbacks.watch(accepted.ref, due=due, now=accepted.created_at)
    return job_id


@pytest.mark.parametrize("shards", sorted({keys.TENANT_SHARDS, *keys.SWEEP_SHARDS.values()}))
def test_job_ids_spread_evenly_over_the_shards(shards: int) -> None:
    """A hot tenant's jobs land on every shard alike: none takes much more than its share."""
    ids = [derive_job_id("acme", f"request-{n}") for n in range(20_000)]
    counts = Counter(keys.shard_of(job_id, shards) for job_id in ids)
    share = len(ids) / shards
    assert set(counts) == set(range(shards))
    # The busiest shard carries what capacity.md assumes, within a few standard deviations.
    assert max(counts.values()) < 1.15 * share


@given(
    first=st.text(alphabet="aT#1", max_size=6) | st.text(max_size=8),
    second=st.text(alphabet="aT#1", max_size=6) | st.text(max_size=8),
    shards=st.tuples(st.integers(0, 99), st.integers(0, 99)),
)
# Names that would meet another tenant's shard if the shard came after the name.
@example(first="a#1", second="a", shards=(0, 1))
@example(first="a", second="a#1", shards=(1, 0))
@example(first="1#a", second="a", shards=(0, 1))
def test_no_two_tenant_shards_share_a_key(first: str, second: str, shards: tuple[int, int]) -> None:
    """Whatever a tenant is named ('1#acme', '#', ''), its shards are its own (I8): a name
    outside the tenant alphabet never makes a key at all."""
    for name, shard in zip((first, second), shards, strict=True):
        if not is_tenant_name(name):
            with pytest.raises(ValueError, match="tenant name"):
                keys.tenant_pk(name, shard)
    if (
        is_tenant_name(first)
        and is_tenant_name(second)
        and (first, shards[0])
        != (
            second,
            shards[1],
        )
    ):
        assert keys.tenant_pk(first, shards[0]) != keys.tenant_pk(second, shards[1])


def test_shard_zero_keeps_the_unsharded_keys() -> None:
    """Items written before sharding are read as shard 0 (no migration)."""
    assert keys.tenant_partitions("acme")[0] == "T#acme"
    for kind in keys.SweepBacklog:
        assert keys.sweep_partitions(kind)[0] == kind
        assert {keys.sweep_kind(pk) for pk in keys.sweep_partitions(kind)} == {kind}


def test_a_value_of_no_known_backlog_is_its_own_kind() -> None:
    # Not a sweep backlog, or no shard number after the last '#': nothing is cut off.
    for value in ("JOB#ACTIVE#x", "OTHER#3", "JOB#ACTIVE#", "T#acme"):
        assert keys.sweep_kind(value) == value


def test_open_jobs_and_pending_callbacks_spread_over_the_sweep_shards(rt: Runtime) -> None:
    for n in range(40):
        submit_watched(rt, f"spread-{n}")
    items = whole_table(rt).values()
    by_kind: dict[str, set[str]] = {}
    for item in items:
        if "sweep_pk" in item:
            pk = item["sweep_pk"]["S"]
            by_kind.setdefault(keys.sweep_kind(pk), set()).add(pk)
    # 40 jobs over 4 shards: a constant key would be one partition; these are all of them.
    for kind in (keys.SweepBacklog.ACTIVE_JOBS, keys.SweepBacklog.CALLBACK_HANDOFF):
        assert by_kind[kind] == set(keys.sweep_partitions(kind))
    tenant_keys = {
        item["gsi1pk"]["S"]
        for item in items
        if "gsi1pk" in item and item[keys.SK]["S"] == keys.JOB_SK
    }
    assert len(tenant_keys) >= 10
    assert all(pk in keys.tenant_partitions("acme") for pk in tenant_keys)


def test_the_sweep_reads_every_shard_oldest_first(
    rt: Runtime, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = []
    for n in range(30):
        clock.advance(1_000)
        created.append(submit_watched(rt, f"old-{n}"))
    assert list(rt.store.active_jobs()) == created
    due = rt.callbacks.due(now=clock.advance(keys.HANDOFF_GRACE_MS + 1))
    assert [ref.job_id for ref in due] == created
    # A budget for ten jobs visits the oldest, whichever shards they are on.
    ticks = itertools.count()
    visited: list[str] = []
    checked = sweep_module._check_job

    def spy(
        runtime: Runtime, record: JobRecord, report: sweep_module.SweepReport, *rest: Any
    ) -> None:
        visited.append(record.job_id)
        checked(runtime, record, report, *rest)

    monkeypatch.setattr(sweep_module, "_check_job", spy)
    # Callbacks re-sent (each one tick) within their share of the budget (a third), then jobs
    # until the rest ends: neither backlog is done, each is taken oldest first.
    report = sweep(rt, budget_ms=(30 + 10 + 1) * 1000, monotonic=lambda: next(ticks))
    assert report.budget_exhausted
    assert 5 <= report.callbacks_resent < 30
    assert visited == created[: report.jobs_checked]
    assert 5 <= report.jobs_checked < 30


def test_an_entry_under_an_unsharded_key_is_still_swept(rt: Runtime, clock: Clock) -> None:
    """A job admitted before sharding sits under `JOB#ACTIVE` whatever its id's shard."""
    job_id = submit(rt, "legacy")
    assert keys.shard_of(job_id, keys.SWEEP_SHARDS[keys.SweepBacklog.ACTIVE_JOBS]) != 0
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.JOB_SK}),
        UpdateExpression="SET sweep_pk = :legacy",
        ExpressionAttributeValues=to_item({":legacy": keys.SweepBacklog.ACTIVE_JOBS.value}),
    )
    assert list(rt.store.active_jobs()) == [job_id]
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    assert sweep(rt).jobs_redispatched == 1
    assert execution.execute(rt, job_id) in {"succeeded", "failed"}
    # Ended, it covers its terminal callback (never delivered here) until the sweep gives that
    # one an entry of its own, a grace period later, and takes the job off its legacy key.
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    assert sweep(rt).ended_jobs_released == 1
    assert list(rt.store.active_jobs()) == []


def test_a_sweep_read_stops_with_its_caller(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lazy: taking one entry reads one page per shard, not the whole backlog."""
    shards = keys.SWEEP_SHARDS[keys.SweepBacklog.ACTIVE_JOBS]
    for n in range(shards * 3):
        submit(rt, f"lazy-{n}")
    queries = 0
    client = rt.store.client
    original = client.query

    def counting(**request: Any) -> Any:
        nonlocal queries
        queries += 1
        return original(**request)

    monkeypatch.setattr(client, "query", counting)
    entries = sweep_entries(client, rt.store.table_name, keys.SweepBacklog.ACTIVE_JOBS)
    assert next(entries)
    assert queries == shards


def test_an_intent_under_an_unsharded_key_is_postponed_after_a_resend(
    rt: Runtime, clock: Clock
) -> None:
    """A callback written before sharding keeps `CALLBACK#HANDOFF`: a re-send still postpones
    it (else every sweep would send it again)."""
    job_id = submit(rt, "unsharded-callback", callback_url="https://consumer.example.test/h")
    assert keys.shard_of(job_id, keys.SWEEP_SHARDS[keys.SweepBacklog.CALLBACK_HANDOFF]) != 0
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.event_sk(1)}),
        UpdateExpression="SET sweep_pk = :legacy, sweep_sk = :due",
        ExpressionAttributeValues=to_item(
            {
                ":legacy": keys.SweepBacklog.CALLBACK_HANDOFF.value,
                ":due": keys.sweep_sk(
                    clock.now + keys.HANDOFF_GRACE_MS, IntentRef(job_id, 1).item_id
                ),
            }
        ),
    )
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    assert sweep(rt).callbacks_resent == 1
    assert sweep(rt).callbacks_resent == 0


@pytest.mark.parametrize(
    "budget",
    [
        ReadBudget(queries=keys.TENANT_SHARDS - 1, items=1_024),
        ReadBudget(queries=32, items=keys.TENANT_SHARDS - 1),
    ],
)
def test_a_read_budget_must_reach_every_shard_once(rt: Runtime, budget: ReadBudget) -> None:
    """A budgeted merge stops where a shard's next item is out of its reach: one that could
    not read every shard once could stop before yielding anything, with no place to resume
    from. Refused when the listing is made, before any read."""
    with pytest.raises(ValueError, match="one read of each shard"):
        rt.store.iter_jobs(JobQuery("acme", budget=budget))
    # A correlation id's two places (`tenant_jobs`, `by_correlation`) need a read each.
    with pytest.raises(ValueError, match="one read of each shard"):
        rt.store.iter_jobs(JobQuery("acme", correlation_id="c", budget=ReadBudget(1, 2)))
    two = ReadBudget(queries=2, items=2)
    assert list(rt.store.iter_jobs(JobQuery("acme", correlation_id="c", budget=two))) == []
