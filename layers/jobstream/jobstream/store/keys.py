"""Key layout of the one table.

    ack cursor     PK=JOB#<job_id>  SK=#ACK     (the consumer's cursor: written by acks only)
    job            PK=JOB#<job_id>  SK=#JOB
    result         PK=JOB#<job_id>  SK=#RESULT  (a succeeded job's result: written once)
    event          PK=JOB#<job_id>  SK=EVT#<sequence:010>  (with its callback's delivery state)
    endpoint       PK=ENDPOINT#<tenant>  SK=ORIGIN#<origin>  (a callback endpoint's health)
    feed cursor    PK=FEED#<tenant> SK=CURSOR#<consumer>  (a named cursor of the tenant's feed)
    quota counter  PK=QUOTA#<tenant>  SK=#QUOTA  (a tenant with quotas: store/quotas.py)
    resource       PK=RESOURCE#<name>  SK=#RESOURCE  (a shared resource's slots, pace, back-off)
    slot waiter    PK=RESOURCE#<name>  SK=WAIT#<created_at:013>#<job_id>  (store/resources.py)
    legacy shards  PK=SWEEP#LEGACY  SK=#RETIRED  (the sweep found the earlier release's extra
                   sweep shards empty: store/sweep_index.py)
    sweep cursor   PK=SWEEP#CURSOR  SK=JOB#ACTIVE  (the open job where the last sweep's pass over
                   open jobs stopped: store/sweep_index.py)

`#ACK` < `#JOB` < `#RESULT` < `EVT#...`: one query of `#ACK`..`#RESULT` reads the cursor, the job
and its result together.

GSIs: `tenant_jobs` (a tenant's jobs, newest first, as a listing shows them: store/listed.py;
and, under a correlation id's `T#<tenant>#C#<correlation_id>`, its jobs' first events' entries,
keys only: store/records.py `correlation_entry`), `by_correlation` (sparse, projecting `status`:
each tenant's dead and retrying callbacks under `T#<tenant>#D` and `#R`, and the job items of
jobs with a correlation id the release before admitted), `sweep` (sparse: work a sweep must
find, oldest first), and `feed` (every protocol event of a tenant in the order it committed, over
FEED_SHARDS partitions; service/feed.py).

Write sharding (docs/capacity.md): a tenant's jobs are spread over TENANT_SHARDS partitions of
`tenant_jobs`, and each kind of sweep backlog over its SWEEP_SHARDS partitions of `sweep`, by a
hash of the job id, so that no partition key takes more than its share of DynamoDB's 1,000 writes
per second. Shard 0 keeps the unsharded key of earlier releases, so items written before sharding
are still read. Raising a shard count later is safe (readers read every shard below it);
lowering it hides items unless the shards above the new count are read until they are empty, as
the sweep backlogs' shards above their count and below LEGACY_SWEEP_SHARDS are
(store/sweep_index.py).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from jobstream.domain import IntentRef
from jobstream.tenant_names import check_tenant_name

PK: Final = "pk"
SK: Final = "sk"
ACK_SK: Final = "#ACK"
JOB_SK: Final = "#JOB"
# What lifecycle/identity.py's derive_job_id makes: "job_" and 24 bytes, URL-safe base64.
JOB_ID_PATTERN: Final = r"job_[A-Za-z0-9_-]{32}"
_JOB_ID: Final = re.compile(JOB_ID_PATTERN)
# The job item's description of its last event until it is known written (store/pending.py).
PENDING_EVENT: Final = "pending_event"
RESULT_SK: Final = "#RESULT"
QUOTA_SK: Final = "#QUOTA"
RESOURCE_SK: Final = "#RESOURCE"
WAITER_PREFIX: Final = "WAIT#"
EVENT_PREFIX: Final = "EVT#"
SEQUENCE_WIDTH: Final = 10
TIME_WIDTH: Final = 13

TENANT_INDEX: Final = "tenant_jobs"
CORRELATION_INDEX: Final = "by_correlation"
SWEEP_INDEX: Final = "sweep"
FEED_INDEX: Final = "feed"
TTL_ATTRIBUTE: Final = "expires_at"


class SweepBacklog(StrEnum):
    """A kind of work the sweep must find: its partition of the `sweep` index (sharded).

    A watched event's open callback (one that failed an attempt, was parked, or was recorded
    once its job had left ACTIVE_JOBS) sits under CALLBACK_HANDOFF with the time the sweep
    should look at it if no delivery closed it (others are found through their job:
    service/callback_coverage.py); a dead one under CALLBACK_DEAD; a job whose stream may still
    lack events, or whose terminal callback it still covers, under ACTIVE_JOBS, oldest first."""

    CALLBACK_HANDOFF = "CALLBACK#HANDOFF"
    CALLBACK_DEAD = "CALLBACK#DEAD"
    ACTIVE_JOBS = "JOB#ACTIVE"


TENANT_SHARDS: Final = 16
# Each kind's shards, by its index writes (docs/capacity.md). A job puts 2 units on the active
# jobs (its entry in and out, which covers its terminal callback too) and none on the hand-off
# backlog unless a callback fails an attempt (2 then; the release before put every terminal
# callback there), so 4 shards hold 4 x 1,000 / 2 = 2,000 admissions a second, twice the goal.
# A dead callback puts 1 on the dead backlog (2 more if redriven) and callbacks die rarely (a
# failing endpoint is paused first): 2 shards hold 2,000 deaths a second.
SWEEP_SHARDS: Final[Mapping[SweepBacklog, int]] = {
    SweepBacklog.CALLBACK_HANDOFF: 4,
    SweepBacklog.CALLBACK_DEAD: 2,
    SweepBacklog.ACTIVE_JOBS: 4,
}
# The earlier release wrote every kind over 32 shards: those above a kind's count are read too
# until the sweep finds them all empty and records so (store/sweep_index.py).
LEGACY_SWEEP_SHARDS: Final = 32
LEGACY_SHARDS_PK: Final = "SWEEP#LEGACY"
LEGACY_SHARDS_SK: Final = "#RETIRED"
# Where the last sweep's pass over open jobs stopped, when its budget ran out (one item).
SWEEP_CURSOR_PK: Final = "SWEEP#CURSOR"
# A tenant's feed partitions: 8 x 1,000 index writes a second hold 2,000 jobs a second of 4
# events each (docs/capacity.md); a feed read queries every one.
FEED_SHARDS: Final = 8
# How long a callback may wait in the queue (or in flight) before the sweep sends it again.
HANDOFF_GRACE_MS: Final = 60_000


def is_job_id(text: str) -> bool:
    """Whether `text` is shaped like a job id: anything else names no job (and is never sent to
    DynamoDB, which refuses a key over 2 KB instead of finding nothing)."""
    return _JOB_ID.fullmatch(text) is not None


def job_pk(job_id: str) -> str:
    return f"JOB#{job_id}"


def quota_pk(tenant: str) -> str:
    # Its own prefix: no job id or tenant name makes it a job's key, or another tenant's.
    return f"QUOTA#{check_tenant_name(tenant)}"


def job_id_of(pk: str) -> str:
    return pk.split("#", 1)[1]


def event_sk(sequence: int) -> str:
    return f"{EVENT_PREFIX}{sequence:0{SEQUENCE_WIDTH}d}"


def sequence_of(sort_key: str) -> int:
    return int(sort_key.split("#", 1)[1])


def shard_of(job_id: str, shards: int) -> int:
    """The job's shard: stable for the job, uniform over job ids (CRC-32 of the id)."""
    return zlib.crc32(job_id.encode()) % shards


def tenant_pk(tenant: str, shard: int) -> str:
    # Shard 0 is `T#<tenant>` (the unsharded key); shard n is `T<n>#<tenant>`. The shard sits
    # before the first '#', so no tenant name can make two (tenant, shard) pairs share a key;
    # a name with '#' could reach another tenant's correlation range: refused, never built.
    name = check_tenant_name(tenant)
    return f"T#{name}" if shard == 0 else f"T{shard}#{name}"


def tenant_partitions(tenant: str) -> list[str]:
    """Every `tenant_jobs` partition that may hold the tenant's jobs."""
    return [tenant_pk(tenant, shard) for shard in range(TENANT_SHARDS)]


def job_tenant_pk(tenant: str, job_id: str) -> str:
    return tenant_pk(tenant, shard_of(job_id, TENANT_SHARDS))


def sweep_pk(backlog: SweepBacklog, shard: int) -> str:
    return backlog.value if shard == 0 else f"{backlog.value}#{shard}"


def sweep_partitions(backlog: SweepBacklog) -> list[str]:
    """Every shard of one kind of sweep backlog that is written to."""
    return [sweep_pk(backlog, shard) for shard in range(SWEEP_SHARDS[backlog])]


def legacy_sweep_partitions(backlog: SweepBacklog) -> list[str]:
    """The shards of one kind that only the earlier release wrote (read until found empty)."""
    return [sweep_pk(backlog, shard) for shard in range(SWEEP_SHARDS[backlog], LEGACY_SWEEP_SHARDS)]


def job_sweep_pk(backlog: SweepBacklog, job_id: str) -> str:
    """The shard of `backlog` that holds the job's items (its intents of the kind share it)."""
    return sweep_pk(backlog, shard_of(job_id, SWEEP_SHARDS[backlog]))


def sweep_kind(value: str) -> str:
    """The kind of sweep backlog a `sweep_pk` value belongs to (its shard removed)."""
    base, _, shard = value.rpartition("#")
    known = shard.isdigit() and any(base == backlog.value for backlog in SweepBacklog)
    return base if known else value


# Endpoints the sweep must look at (paused: its next probe; resumed: its backlog to drain), by
# when; few at any time, so one partition.
HELD_ENDPOINTS: Final = "ENDPOINT#HELD"
# The callbacks an endpoint holds back (parked), one partition per endpoint, oldest event first.
PARKED_PREFIX: Final = "CALLBACK#PARKED#"


def endpoint_pk(tenant: str) -> str:
    return f"ENDPOINT#{check_tenant_name(tenant)}"


def endpoint_sk(origin: str) -> str:
    return f"ORIGIN#{origin}"


def origin_of(sort_key: str) -> str:
    return sort_key.removeprefix("ORIGIN#")


def parked_pk(tenant: str, origin: str) -> str:
    # An origin holds no '#' (scheme://host:port) and a tenant name never does.
    return f"{PARKED_PREFIX}{check_tenant_name(tenant)}#{origin}"


def held_sk(due_at: int, tenant: str, origin: str) -> str:
    return f"{due_at:0{TIME_WIDTH}d}#{tenant}#{origin}"


def held_of(sort_key: str) -> tuple[str, str]:
    """The (tenant, origin) a HELD_ENDPOINTS entry names."""
    _, tenant, origin = sort_key.split("#", 2)
    return tenant, origin


def correlation_pk(tenant: str, correlation_id: str) -> str:
    return f"T#{check_tenant_name(tenant)}#C#{correlation_id}"


def created_sk(created_at: int, job_id: str) -> str:
    return f"{created_at:0{TIME_WIDTH}d}#{job_id}"


def sweep_sk(due_at: int, item_id: str) -> str:
    return f"{due_at:0{TIME_WIDTH}d}#{item_id}"


def sweep_due_bound(now: int) -> str:
    """The first sweep sort key that is not yet due at `now`."""
    return time_key(now + 1)


def time_key(at: int) -> str:
    """The first sort key of time `at` in a time-ordered list (`<time>#...`, `sweep_sk`): the
    keys of `at` and later sort at or after it, earlier ones before."""
    return f"{at:0{TIME_WIDTH}d}"


def intent_item_id(job_id: str, sequence: int) -> str:
    return IntentRef(job_id, sequence).item_id


class TenantCallbacks(StrEnum):
    """A tenant's own list of callbacks in one state, in the `by_correlation` index under
    `T#<tenant>#<letter>` (never a correlation id's `#C#`): GET /callbacks?state=."""

    DEAD = "D"  # their attempts spent, oldest death first
    PENDING = "R"  # a failed attempt behind them, waiting for the next, oldest event first


def tenant_callbacks_pk(tenant: str, listed: TenantCallbacks) -> str:
    return f"T#{check_tenant_name(tenant)}#{listed.value}"


def feed_pk(tenant: str, job_id: str) -> str:
    """The feed partition of the job's events: the tenant's shard of the job (as `tenant_pk`,
    the shard sits before the first '#')."""
    return feed_partition(tenant, shard_of(job_id, FEED_SHARDS))


def tenant_of_feed_pk(value: str) -> str | None:
    """The tenant a `feed_pk` names (an event's item carries it: its callback's message
    group), None for anything else."""
    shard, separator, tenant = value.partition("#")
    return tenant if separator and shard[:1] == "F" and shard[1:].isdigit() and tenant else None


def feed_partition(tenant: str, shard: int) -> str:
    return f"F{shard}#{check_tenant_name(tenant)}"


def feed_partitions(tenant: str) -> list[str]:
    """Every `feed` partition of the tenant."""
    return [feed_partition(tenant, shard) for shard in range(FEED_SHARDS)]


def feed_sk(stamp: int, job_id: str, sequence: int) -> str:
    """A feed entry's place: when it committed, then its job and sequence (one order for all
    shards, and a job's events in sequence order at equal stamps)."""
    return f"{stamp:0{TIME_WIDTH}d}#{job_id}#{sequence:0{SEQUENCE_WIDTH}d}"


def feed_cursor_key(tenant: str, consumer: str) -> tuple[str, str]:
    return f"FEED#{check_tenant_name(tenant)}", f"CURSOR#{consumer}"


def resource_pk(name: str) -> str:
    # A resource's name is checked where it is configured (config/targets.py: no '#').
    return f"RESOURCE#{name}"


def waiter_sk(created_at: int, job_id: str) -> str:
    """A slot waiter's place: the oldest job first, wherever and however often it waited."""
    return f"{WAITER_PREFIX}{created_at:0{TIME_WIDTH}d}#{job_id}"
