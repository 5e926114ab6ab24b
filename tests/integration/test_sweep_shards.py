"""The sweep index's shards per kind (issue 28 item 3): an idle sweep makes a few queries, and a
table of the release that wrote every kind over 32 shards keeps its entries there found (swept,
listed) until sweeps have found those shards empty for a quiet period and record so; then they
are read no more."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from jobstream.domain import AttemptAnswer, IntentRef
from jobstream.runtime import Runtime
from jobstream.service import admission, callback_coverage, execution
from jobstream.service.sweep import sweep
from jobstream.store import keys, sweep_index
from jobstream.store.codec import to_item
from tests.support.harness import Clock, canonical_task

HOOKS = "https://consumer.example.test/hooks"
# A table upgraded from the release with 32 shards: no record of its legacy shards yet.
LEGACY = pytest.mark.bare_table
Call = tuple[str, dict[str, Any]]


@contextmanager
def calls(rt: Runtime) -> Iterator[list[Call]]:
    """Every DynamoDB call made meanwhile: its operation and its parameters."""
    made: list[Call] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        made.append((model.name, dict(params)))

    events = rt.store.client.meta.events
    events.register("provide-client-params.dynamodb", record, "sweep-shard-calls")
    try:
        yield made
    finally:
        events.unregister("provide-client-params.dynamodb", unique_id="sweep-shard-calls")


def operations(made: list[Call]) -> Counter[str]:
    return Counter(name for name, _ in made)


def partitions_read(made: list[Call]) -> list[str]:
    """The `sweep` index partitions queried, one per query."""
    return [
        params["ExpressionAttributeValues"][":p"]["S"]
        for name, params in made
        if name == "Query" and params.get("IndexName") == keys.SWEEP_INDEX
    ]


def legacy_partitions() -> set[str]:
    return {pk for kind in keys.SweepBacklog for pk in keys.legacy_sweep_partitions(kind)}


def current_partitions(*kinds: keys.SweepBacklog) -> list[str]:
    return [pk for kind in kinds for pk in keys.sweep_partitions(kind)]


# What an idle sweep reads: every shard written of the two backlogs it visits, and the paused
# or resumed endpoints (one partition of the same index).
IDLE_SWEEP_READS = [
    *current_partitions(keys.SweepBacklog.CALLBACK_HANDOFF, keys.SweepBacklog.ACTIVE_JOBS),
    keys.HELD_ENDPOINTS,
]


def retired_record(rt: Runtime) -> dict[str, Any] | None:
    item: dict[str, Any] | None = rt.store.client.get_item(
        TableName=rt.store.table_name,
        Key=to_item({keys.PK: keys.LEGACY_SHARDS_PK, keys.SK: keys.LEGACY_SHARDS_SK}),
        ConsistentRead=True,
    ).get("Item")
    return item


def submit(rt: Runtime, key: str) -> str:
    status, body = admission.submit(
        rt, "acme", canonical_task(idempotency_key=key, callback_url=HOOKS), None
    )
    assert status == 202
    job_id: str = body["job"]["job_id"]
    return job_id


def into_legacy_shard(rt: Runtime, sort_key: str, kind: keys.SweepBacklog, job_id: str) -> str:
    """Move one of the job's sweep entries where the earlier release put it: its shard of 32,
    one this release no longer writes."""
    shard = keys.shard_of(job_id, keys.LEGACY_SWEEP_SHARDS)
    assert shard >= keys.SWEEP_SHARDS[kind]
    partition = keys.sweep_pk(kind, shard)
    key = to_item({keys.PK: keys.job_pk(job_id), keys.SK: sort_key})
    item = rt.store.client.get_item(TableName=rt.store.table_name, Key=key)["Item"]
    # The earlier release put every event's open callback in the index, due a grace period
    # after its event (this one only a terminal event's: an accepted one gets its entry here).
    if "sweep_sk" in item:
        due = item["sweep_sk"]["S"]
    else:
        ref = IntentRef(job_id, keys.sequence_of(sort_key))
        due = keys.sweep_sk(int(item["at"]["N"]) + keys.HANDOFF_GRACE_MS, ref.item_id)
    rt.store.client.update_item(
        TableName=rt.store.table_name,
        Key=key,
        UpdateExpression="SET sweep_pk = :legacy, sweep_sk = :due",
        ExpressionAttributeValues=to_item({":legacy": partition, ":due": due}),
    )
    return partition


def kill(rt: Runtime, ref: IntentRef, now: int) -> None:
    """The callback's last attempt failed: dead."""
    claimed = rt.callbacks.claim(ref, now=now, lease_ms=1_000)
    assert claimed is not None
    assert rt.callbacks.mark_dead(claimed, AttemptAnswer(503, "HTTP 503"), now=now, tenant="acme")


def deliver(rt: Runtime, ref: IntentRef, now: int) -> None:
    claimed = rt.callbacks.claim(ref, now=now, lease_ms=1_000)
    assert claimed is not None
    assert rt.callbacks.mark_delivered(claimed, now=now, status=204)


def test_the_shard_counts_hold_twice_the_goal() -> None:
    """2 index writes a job on the hand-off and active backlogs, 1,000 per shard: 4 shards hold
    2,000 admissions a second; dead callbacks take 2 (rare). Shard 0 is the unsharded key."""
    assert keys.SWEEP_SHARDS == {
        keys.SweepBacklog.CALLBACK_HANDOFF: 4,
        keys.SweepBacklog.ACTIVE_JOBS: 4,
        keys.SweepBacklog.CALLBACK_DEAD: 2,
    }
    for kind, shards in keys.SWEEP_SHARDS.items():
        written = keys.sweep_partitions(kind)
        legacy = keys.legacy_sweep_partitions(kind)
        assert written[0] == kind.value
        assert written + legacy == [keys.sweep_pk(kind, n) for n in range(32)]
        assert len(written) == shards
        job_ids = [f"job_{n:032d}" for n in range(200)]
        assert {keys.job_sweep_pk(kind, job_id) for job_id in job_ids} == set(written)


def test_an_idle_sweep_makes_a_query_per_shard_written_and_one_of_the_held_endpoints(
    rt: Runtime,
) -> None:
    with calls(rt) as made:
        report = sweep(rt)
    assert not report.did_work
    # Warm: the table's record of retired legacy shards is known in this process.
    assert operations(made) == {"Query": 9}
    assert sorted(partitions_read(made)) == sorted(IDLE_SWEEP_READS)


def test_a_cold_instance_reads_the_record_once(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep_index, "_retired_tables", set())
    with calls(rt) as made:
        sweep(rt)
    assert operations(made) == {"Query": 9, "GetItem": 1}
    with calls(rt) as made:
        sweep(rt)
    assert operations(made) == {"Query": 9}


@LEGACY
def test_an_upgraded_table_left_empty_is_retired_once_it_stayed_empty_for_the_quiet_period(
    rt: Runtime, clock: Clock
) -> None:
    """Each legacy shard of every kind read for one entry at most, and the time they were first
    found empty recorded; retired (for good) by the first sweep LEGACY_QUIET_MS later that
    still finds them empty: an instance of the earlier release may write there meanwhile. Every
    later sweep leaves the legacy shards alone."""
    with calls(rt) as made:
        sweep(rt)
    read = partitions_read(made)
    assert read[: len(legacy_partitions())] == [
        pk for kind in keys.SweepBacklog for pk in keys.legacy_sweep_partitions(kind)
    ]
    assert len(legacy_partitions()) == 86  # 28 + 28 + 30
    record = retired_record(rt)
    assert record is not None
    assert record["empty_since"] == {"N": str(clock.now)}
    assert "retired_at" not in record
    clock.advance(sweep_index.LEGACY_QUIET_MS - 1)
    sweep(rt)
    assert "retired_at" not in (retired_record(rt) or {})
    clock.advance(1)
    with calls(rt) as made:
        sweep(rt)
    read = partitions_read(made)
    # The look at the legacy shards, then the 9 reads of an idle sweep (they are retired).
    assert read[: len(legacy_partitions())] == [
        pk for kind in keys.SweepBacklog for pk in keys.legacy_sweep_partitions(kind)
    ]
    assert sorted(read[len(legacy_partitions()) :]) == sorted(IDLE_SWEEP_READS)
    assert operations(made) == {"GetItem": 1, "Query": 86 + 9, "UpdateItem": 1}
    assert (retired_record(rt) or {}).get("retired_at") == {"N": str(clock.now)}
    with calls(rt) as made:
        sweep(rt)
    assert operations(made) == {"Query": 9}


@LEGACY
def test_an_entry_written_during_the_quiet_period_starts_it_over(rt: Runtime, clock: Clock) -> None:
    sweep(rt)
    assert (retired_record(rt) or {}).get("empty_since") == {"N": str(clock.now)}
    job_id = submit(rt, "late-writer")
    into_legacy_shard(rt, keys.JOB_SK, keys.SweepBacklog.ACTIVE_JOBS, job_id)
    clock.advance(sweep_index.LEGACY_QUIET_MS)
    report = sweep(rt)
    assert report.jobs_checked == 1  # found where it was written
    record = retired_record(rt) or {}
    assert "empty_since" not in record
    assert "retired_at" not in record


@LEGACY
def test_entries_in_legacy_shards_are_swept_until_a_sweep_finds_them_empty(
    rt: Runtime, clock: Clock
) -> None:
    job_id = submit(rt, "legacy-shards")
    ref = IntentRef(job_id, 1)
    active = into_legacy_shard(rt, keys.JOB_SK, keys.SweepBacklog.ACTIVE_JOBS, job_id)
    handoff = into_legacy_shard(rt, keys.event_sk(1), keys.SweepBacklog.CALLBACK_HANDOFF, job_id)
    assert list(rt.store.active_jobs()) == [job_id]
    clock.advance(keys.HANDOFF_GRACE_MS + 1)
    assert list(rt.callbacks.due(now=clock.now)) == [ref]

    with calls(rt) as made:
        report = sweep(rt)
    # Found and handled where the earlier release put them.
    assert (report.callbacks_resent, report.jobs_redispatched) == (1, 1)
    assert {active, handoff} <= set(partitions_read(made))
    # Not empty yet: nothing recorded.
    assert retired_record(rt) is None
    # Not due (the re-send postponed it), still there: a sweep still reads every legacy shard.
    with calls(rt) as made:
        report = sweep(rt)
    assert report.callbacks_resent == 0
    swept = (keys.SweepBacklog.CALLBACK_HANDOFF, keys.SweepBacklog.ACTIVE_JOBS)
    assert {pk for kind in swept for pk in keys.legacy_sweep_partitions(kind)} <= set(
        partitions_read(made)
    )
    assert retired_record(rt) is None

    # The job ends and its callbacks are delivered: its first off CALLBACK#HANDOFF, its
    # terminal one last, which takes the job off JOB#ACTIVE.
    assert execution.execute(rt, job_id) in {"succeeded", "failed"}
    ended = rt.store.get_job_item(job_id)
    assert ended is not None
    for sequence in range(1, ended.event_count):
        deliver(rt, IntentRef(job_id, sequence), clock.now)
    terminal = rt.callbacks.claim(IntentRef(job_id, ended.event_count), now=clock.now, lease_ms=1)
    assert terminal is not None
    assert rt.callbacks.mark_delivered(terminal, now=clock.now, status=204)
    callback_coverage.release_job(rt, terminal, ended)  # as the callbacks service does
    assert list(rt.store.active_jobs()) == []
    assert retired_record(rt) is None
    sweep(rt)
    clock.advance(sweep_index.LEGACY_QUIET_MS)
    sweep(rt)
    assert "retired_at" in (retired_record(rt) or {})
    with calls(rt) as made:
        sweep(rt)
        assert list(rt.callbacks.dead()) == []
    assert not legacy_partitions() & set(partitions_read(made))


@LEGACY
def test_the_dead_listing_finds_dead_callbacks_in_legacy_shards(rt: Runtime, clock: Clock) -> None:
    """The operator's redrive reads the legacy dead shards too, oldest death first across all
    shards; a dead entry there, however old, keeps the legacy shards read."""
    first = IntentRef(submit(rt, "legacy-dead"), 1)
    second = IntentRef(submit(rt, "dead-now"), 1)
    kill(rt, first, clock.advance(1_000))
    kill(rt, second, clock.advance(1_000))
    into_legacy_shard(rt, keys.event_sk(1), keys.SweepBacklog.CALLBACK_DEAD, first.job_id)
    assert [dead.ref for dead in rt.callbacks.dead()] == [first, second]
    sweep(rt)
    assert retired_record(rt) is None

    # Redriven: open again, in this release's hand-off shards; the legacy ones are empty.
    dead = next(rt.callbacks.dead())
    assert rt.callbacks.revive(dead, now=clock.advance(1_000))
    sweep(rt)
    clock.advance(sweep_index.LEGACY_QUIET_MS)
    sweep(rt)
    assert "retired_at" in (retired_record(rt) or {})
    with calls(rt) as made:
        assert [dead.ref for dead in rt.callbacks.dead()] == [second]
    assert partitions_read(made) == current_partitions(keys.SweepBacklog.CALLBACK_DEAD)
