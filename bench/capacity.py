"""How many admissions per second each partition key of the table holds (docs/capacity.md).

One job's life (bench.cost) is billed by the partition key each write lands on (bench.billing:
key_write_units). DynamoDB gives one partition key at most 1,000 write units per second, a
global secondary index's writes counting against the index's own partition; a key kind spread
over n shards by a hash of the job id holds n times that. So a key kind holds
`n * 1000 / (its write units per job)` jobs per second: per tenant for `tenant_jobs`, per
correlation id for its partition of `tenant_jobs` (and of `by_correlation`), per job for the
table's own `JOB#<job_id>`, per tenant with quotas for its counter `QUOTA#<tenant>`, per
tenant for its `feed`, in total for the sweep's backlogs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from jobstream.store import keys

if TYPE_CHECKING:
    from bench.cost import JobCost

PARTITION_WRITE_UNITS_PER_S: Final = 1_000
GOAL_ADMISSIONS_PER_S: Final = 1_000
TABLE: Final = "table"
QUOTA_KIND: Final = "QUOTA#<tenant>"
FEED_KIND: Final = "F<shard>#<tenant>"
ENDPOINT_KIND: Final = "ENDPOINT#<tenant>"
CORRELATION_KIND: Final = "T#<tenant>#C#<correlation_id>"
# A tenant's dead and retrying callbacks (store/keys.py TenantCallbacks).
CALLBACK_LISTS_KIND: Final = "T#<tenant>#<D|R>"


def partition_kind(where: str, value: str) -> str:
    """The kind of partition key a value is: its tenant, job, shard and correlation id removed."""
    if where in (keys.TENANT_INDEX, keys.CORRELATION_INDEX) and "#C#" in value:
        return CORRELATION_KIND
    if where == keys.TENANT_INDEX:
        return "T#<tenant>"
    if where == keys.CORRELATION_INDEX:
        return CALLBACK_LISTS_KIND
    if where == keys.SWEEP_INDEX:
        return keys.sweep_kind(value)
    if where == keys.FEED_INDEX:
        return FEED_KIND
    if value.startswith("QUOTA#"):
        return QUOTA_KIND
    if value.startswith("ENDPOINT#"):
        return ENDPOINT_KIND
    return "JOB#<job_id>"


# Per kind: how many shards it has, and for whom its capacity counts.
SHARDS: Final[dict[tuple[str, str], tuple[int, str]]] = {
    (TABLE, "JOB#<job_id>"): (1, "per job"),
    # A tenant with quotas: its one counter item (store/quotas.py).
    (TABLE, QUOTA_KIND): (1, "per tenant with quotas"),
    # A tenant's callback endpoints' health items (store/endpoints.py).
    (TABLE, ENDPOINT_KIND): (1, "per tenant"),
    (keys.TENANT_INDEX, "T#<tenant>"): (keys.TENANT_SHARDS, "per tenant"),
    # A correlation id's entries: its jobs' first events' (store/records.py), and those of the
    # jobs the release before admitted on `by_correlation`.
    (keys.TENANT_INDEX, CORRELATION_KIND): (1, "per correlation id"),
    (keys.CORRELATION_INDEX, CORRELATION_KIND): (1, "per correlation id"),
    (keys.CORRELATION_INDEX, CALLBACK_LISTS_KIND): (1, "per tenant"),
    # The tenant's feed: its protocol events over FEED_SHARDS partitions (store/feed.py).
    (keys.FEED_INDEX, FEED_KIND): (keys.FEED_SHARDS, "per tenant"),
    **{
        (keys.SWEEP_INDEX, kind.value): (keys.SWEEP_SHARDS[kind], "in total")
        for kind in keys.SweepBacklog
    },
}


@dataclass(frozen=True)
class KeyCapacity:
    where: str
    kind: str
    shards: int
    scope: str
    units_per_job: float

    @property
    def jobs_per_second(self) -> float:
        """Sustained admissions per second before one shard of this key throttles."""
        return self.shards * PARTITION_WRITE_UNITS_PER_S / self.units_per_job

    @property
    def units_per_shard_at_goal(self) -> float:
        """Write units per second on each shard when GOAL_ADMISSIONS_PER_S all land here."""
        return GOAL_ADMISSIONS_PER_S * self.units_per_job / self.shards


def capacities(cost: JobCost, table_name: str) -> list[KeyCapacity]:
    found = []
    for (where, kind), units in sorted(cost.bill.key_write_units.items()):
        name = TABLE if where == table_name else where
        shards, scope = SHARDS.get((name, kind), (1, "?"))
        found.append(KeyCapacity(name, kind, shards, scope, units))
    return found


def report_lines(costs: list[JobCost], table_name: str) -> list[str]:
    lines = [
        "## Write capacity by partition key",
        "",
        "Write units one job's life puts on each kind of partition key (billed as above), and",
        f"what that means against DynamoDB's {PARTITION_WRITE_UNITS_PER_S:,} write units per",
        "second per partition key: the admissions per second the key holds (shards x 1,000 /",
        f"units per job) and the units per second on each shard at {GOAL_ADMISSIONS_PER_S:,}",
        "admissions per second (all of one tenant, or all of one correlation id, for those keys).",
        "The analysis is in docs/capacity.md.",
        "",
        (
            "| job | table / index | partition key | shards | units per job | "
            "admissions/s it holds | units/s per shard at the goal |"
        ),
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for cost in costs:
        for row in capacities(cost, table_name):
            if row.where == TABLE and row.kind != QUOTA_KIND:
                # One partition per job: its writes are spread over the job's life.
                holds, at_goal = "one job per key", "-"
            else:
                holds = f"{row.jobs_per_second:,.0f} {row.scope}"
                at_goal = f"{row.units_per_shard_at_goal:,.0f}"
            lines.append(
                f"| {cost.scenario} | {row.where} | `{row.kind}` | {row.shards} | "
                f"{row.units_per_job:g} | {holds} | {at_goal} |"
            )
    lines.append("")
    return lines
