"""Moving a job's durable state the way an executor or a sweep would (no worker exists yet).

These write the job row only, never events: the event stream must follow by reconcile.
"""

from __future__ import annotations

from typing import Any

from jobstream.runtime import Runtime
from jobstream.store import keys, listed
from jobstream.store.codec import from_item, to_attribute, to_item


def set_job_attributes(rt: Runtime, job_id: str, **values: Any) -> None:
    """Set attributes of the job item, and its listing map as every real write keeps it: the
    values a queued or finished job shows (store/listed.py), none while it runs."""
    names = {f"#a{i}": name for i, name in enumerate(values)}
    attribute_values = {f":a{i}": to_attribute(value) for i, value in enumerate(values.values())}
    key = to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.JOB_SK})
    rt.store.client.update_item(
        TableName=rt.settings.table_name,
        Key=key,
        UpdateExpression="SET "
        + ", ".join(f"{n} = {v}" for n, v in zip(names, attribute_values, strict=True)),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=attribute_values,
    )
    record = rt.store.get_job_item(job_id)
    assert record is not None
    shown = listed.shown(record)
    rt.store.client.update_item(
        TableName=rt.settings.table_name,
        Key=key,
        UpdateExpression="REMOVE #listed" if shown is None else "SET #listed = :listed",
        ExpressionAttributeNames={"#listed": listed.ATTRIBUTE},
        **({} if shown is None else {"ExpressionAttributeValues": to_item({":listed": shown})}),
    )


def mark_running(rt: Runtime, job_id: str, *, at: int, lease_until: int) -> None:
    set_job_attributes(
        rt,
        job_id,
        status="running",
        started_at=at,
        heartbeat_at=at,
        updated_at=at,
        lease_owner="worker-1",
        lease_expires_at=lease_until,
        attempt=1,
        progress_stage="searching",
    )


def mark_succeeded(
    rt: Runtime, job_id: str, *, at: int, result: dict[str, Any] | None = None
) -> None:
    """The result in its own item first (as a completion writes it), then the status."""
    record = rt.store.get_job_item(job_id)
    assert record is not None
    rt.store.put_result(
        record,
        result
        or {
            "candidates": [
                {
                    "candidate_id": "149713092",
                    "platform": "pixiv",
                    "work_id": "149713092",
                    "work_type": "illustration",
                }
            ],
            "scanned": 5,
        },
        expires_at=2_000_000_000,
    )
    set_job_attributes(rt, job_id, status="succeeded", updated_at=at)


def mark_failed(rt: Runtime, job_id: str, *, at: int, reason: str, status: str = "failed") -> None:
    set_job_attributes(rt, job_id, status=status, updated_at=at, reason=reason)


def whole_table(rt: Runtime) -> dict[tuple[str, str], dict[str, Any]]:
    """Every item of the runtime's table, by key (a consistent scan of all pages)."""
    client = rt.store.client
    request: dict[str, Any] = {"TableName": rt.store.table_name, "ConsistentRead": True}
    items: dict[tuple[str, str], dict[str, Any]] = {}
    while True:
        response = client.scan(**request)
        for item in response.get("Items", []):
            items[(item[keys.PK]["S"], item[keys.SK]["S"])] = item
        if "LastEvaluatedKey" not in response:
            return items
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def callback_intents(rt: Runtime, job_id: str) -> list[dict[str, Any]]:
    """Every event of the job that carries a callback, in event order, as stored."""
    request: dict[str, Any] = {
        "TableName": rt.settings.table_name,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :events)",
        "ExpressionAttributeNames": {"#pk": keys.PK, "#sk": keys.SK},
        "ExpressionAttributeValues": to_item(
            {":pk": keys.job_pk(job_id), ":events": keys.EVENT_PREFIX}
        ),
        "ConsistentRead": True,
    }
    intents: list[dict[str, Any]] = []
    while True:
        response = rt.store.client.query(**request)
        intents += [from_item(item) for item in response.get("Items", []) if "state" in item]
        if "LastEvaluatedKey" not in response:
            return intents
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def among_open_jobs(rt: Runtime, job_id: str) -> bool:
    """Whether the job item has its entry among the sweep's open jobs (JOB#ACTIVE)."""
    item = rt.store.client.get_item(
        TableName=rt.settings.table_name,
        Key=to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.JOB_SK}),
        ConsistentRead=True,
    )["Item"]
    entry = item.get("sweep_pk", {}).get("S")
    return entry is not None and keys.sweep_kind(entry) == keys.SweepBacklog.ACTIVE_JOBS
