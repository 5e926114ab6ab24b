"""A tenant's quota counter: one item per tenant with quotas, written in the job's own transactions.

    quota counter  PK=QUOTA#<tenant>  SK=#QUOTA
                   open_jobs          the tenant's counted jobs without a terminal event
                   window_minute      the minute (epoch ms // 60,000) of the current window
                   window_admissions  the admissions counted in that window

An admission under quotas adds one update of this item to its transaction (the job, its first
event): the job is counted (`quota_counted`) and `open_jobs` goes up, guarded by the quotas, so
that however many admissions race, no more are admitted than the quotas allow. The terminal event
of a counted job takes it off `open_jobs` in its own transaction, once (a job has one terminal
event), so the count never drifts: a refused or failed admission wrote nothing, a replay writes
nothing, and a job counted under quotas since removed is still released. A job admitted without
quotas is never counted: quotas set later bound only the jobs admitted from then on.

Admissions per minute are a fixed window kept on the same item: the first admission of a minute
starts it (`window_minute`, `window_admissions` = 1), the next ones add to it. Which update an
admission sends is its guess; a refusal returns the item as it was (ALL_OLD), which says whether
the tenant is over a quota (the admission is refused) or the guess was wrong (one more try).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from jobstream.store import keys
from jobstream.store.codec import from_item, to_item
from jobstream.store.ports import QuotaCharge, QuotaExceededError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

OPEN_JOBS: Final = "open_jobs"
WINDOW_MINUTE: Final = "window_minute"
WINDOW_ADMISSIONS: Final = "window_admissions"
MINUTE_MS: Final = 60_000
# What a client refused for its open jobs should wait: a slot frees when one of its jobs ends,
# which the producer cannot foresee; a short wait finds it soon after.
OPEN_JOBS_RETRY_AFTER_S: Final = 5


def quota_key(tenant: str) -> dict[str, Any]:
    return to_item({keys.PK: keys.quota_pk(tenant), keys.SK: keys.QUOTA_SK})


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try of a charge: the minute it counts in, and whether it starts that minute's window."""

    charge: QuotaCharge
    minute: int
    new_window: bool = False

    @classmethod
    def first(cls, charge: QuotaCharge) -> Attempt:
        return cls(charge, charge.now_ms // MINUTE_MS)


def charge_item(table_name: str, attempt: Attempt) -> TransactWriteItemTypeDef:
    """The update that counts one more open job (and admission of the minute) of the tenant."""
    charge = attempt.charge
    names = {"#open": OPEN_JOBS}
    values: dict[str, Any] = {":one": 1}
    conditions = []
    update = "ADD #open :one"
    if charge.max_open_jobs is not None:
        values[":max_open"] = charge.max_open_jobs
        # Never more open jobs than the quota, however many admissions race.
        conditions.append("(attribute_not_exists(#open) OR #open < :max_open)")
    if charge.admissions_per_minute is not None:
        names.update({"#minute": WINDOW_MINUTE, "#count": WINDOW_ADMISSIONS})
        values[":minute"] = attempt.minute
        if attempt.new_window:
            # Only a window of an earlier minute (or none) is replaced: the first admission of
            # a minute starts its window, once, and a later one adds to it.
            conditions.append("(attribute_not_exists(#minute) OR #minute < :minute)")
            update = "SET #minute = :minute, #count = :one ADD #open :one"
        else:
            values[":per_minute"] = charge.admissions_per_minute
            # Never more admissions in this minute's window than the quota.
            conditions.append("#minute = :minute AND #count < :per_minute")
            update = "ADD #open :one, #count :one"
    operation: dict[str, Any] = {
        "TableName": table_name,
        "Key": quota_key(charge.tenant),
        "UpdateExpression": update,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": to_item(values),
        # A refusal says why: the item as it was (`next_attempt`).
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if conditions:
        operation["ConditionExpression"] = " AND ".join(conditions)
    item: TransactWriteItemTypeDef = {"Update": operation}  # type: ignore[typeddict-item]
    return item


def release_item(table_name: str, tenant: str) -> TransactWriteItemTypeDef:
    """The update that takes one finished job off the tenant's open jobs. No condition: it
    rides in the job's terminal transaction, which the job's own guards let happen once."""
    return {
        "Update": {
            "TableName": table_name,
            "Key": quota_key(tenant),
            "UpdateExpression": "ADD #open :minus_one",
            "ExpressionAttributeNames": {"#open": OPEN_JOBS},
            "ExpressionAttributeValues": to_item({":minus_one": -1}),
        }
    }


def next_attempt(attempt: Attempt, old_item: Mapping[str, Any] | None) -> Attempt:
    """After the counter refused `attempt` (`old_item`: the item as the refusal found it), the
    try that may succeed; QuotaExceededError when the tenant is over one of its quotas."""
    charge = attempt.charge
    state = from_item(old_item or {})
    open_jobs = int(state.get(OPEN_JOBS, 0))
    if charge.max_open_jobs is not None and open_jobs >= charge.max_open_jobs:
        raise QuotaExceededError(
            charge.tenant, "max_open_jobs", charge.max_open_jobs, OPEN_JOBS_RETRY_AFTER_S
        )
    limit = charge.admissions_per_minute
    if limit is None:
        return attempt  # the counter changed meanwhile: the same try again
    window = state.get(WINDOW_MINUTE)
    if window is None or int(window) < attempt.minute:
        return replace(attempt, new_window=True)
    if int(window) > attempt.minute:
        # Another admission's clock is a minute ahead and started its window: count in it.
        return replace(attempt, minute=int(window), new_window=False)
    if int(state.get(WINDOW_ADMISSIONS, 0)) >= limit:
        raise QuotaExceededError(
            charge.tenant, "admissions_per_minute", limit, _seconds_to_next_window(attempt)
        )
    return replace(attempt, new_window=False)


def _seconds_to_next_window(attempt: Attempt) -> int:
    left_ms = (attempt.minute + 1) * MINUTE_MS - attempt.charge.now_ms
    return max(1, math.ceil(left_ms / 1000))
