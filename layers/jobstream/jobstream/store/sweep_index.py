"""Reading the sparse sweep index: one kind of backlog over its shards, oldest first.

Upgrade from the release that wrote every kind over `keys.LEGACY_SWEEP_SHARDS` shards: each kind
is now written over its own count (`keys.SWEEP_SHARDS`), and nothing writes the shards above it.
Entries left there are still read, with the rest, until sweeps have found every one of those
shards empty for LEGACY_QUIET_MS and record so in one item (`retire_legacy_shards`); from then on
they are never read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from jobstream.store import keys
from jobstream.store.client import error_code
from jobstream.store.codec import to_item
from jobstream.store.shards import MergedQuery

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

# Entries read per query of one shard: index entries are keys only (~100 bytes), so a read ahead
# that the sweep's budget leaves unused costs next to nothing.
SHARD_PAGE: Final = 50

# Tables whose legacy shards this process has seen retired: once retired they stay so (nothing
# writes there), so a warm instance reads the record once, not at every sweep.
_retired_tables: set[str] = set()
# How long the legacy shards must stay empty before they are retired: an instance of the earlier
# release still running while a deployment replaces it (an invocation lasts 15 minutes at most)
# may write there meanwhile.
LEGACY_QUIET_MS: Final = 30 * 60_000


def _legacy_key() -> dict[str, Any]:
    return to_item({keys.PK: keys.LEGACY_SHARDS_PK, keys.SK: keys.LEGACY_SHARDS_SK})


def _marker(client: DynamoDBClient, table_name: str) -> dict[str, Any]:
    response = client.get_item(
        TableName=table_name, Key=_legacy_key(), ConsistentRead=True, ReturnConsumedCapacity="TOTAL"
    )
    return response.get("Item") or {}


def legacy_shards_retired(client: DynamoDBClient, table_name: str) -> bool:
    """Whether the legacy shards are known empty for good: one GetItem until seen so."""
    if table_name in _retired_tables:
        return True
    retired = "retired_at" in _marker(client, table_name)
    if retired:
        _retired_tables.add(table_name)
    return retired


def retire_legacy_shards(client: DynamoDBClient, table_name: str, *, now: int) -> bool:
    """The sweep's look at the legacy shards of every kind: True when they are retired (before,
    or now); False while one holds an entry, or until they have stayed empty LEGACY_QUIET_MS
    (since `empty_since`, recorded when a look first found them empty). Reads one entry at
    most of each shard, and stops at the first that has one."""
    if table_name in _retired_tables:
        return True
    marker = _marker(client, table_name)
    if "retired_at" in marker:
        _retired_tables.add(table_name)
        return True
    if _any_legacy_entry(client, table_name):
        if "empty_since" in marker:
            # Written to again (an instance of the earlier release): the quiet starts over.
            _update_marker(client, table_name, "REMOVE empty_since", {})
        return False
    if "empty_since" not in marker:
        _update_marker(client, table_name, "SET empty_since = :now", {":now": now})
        return False
    if now - int(marker["empty_since"]["N"]) < LEGACY_QUIET_MS:
        return False
    record_legacy_shards_retired(client, table_name, now=now)
    return True


def _any_legacy_entry(client: DynamoDBClient, table_name: str) -> bool:
    for backlog in keys.SweepBacklog:
        for partition in keys.legacy_sweep_partitions(backlog):
            response = client.query(
                TableName=table_name,
                IndexName=keys.SWEEP_INDEX,
                KeyConditionExpression="sweep_pk = :p",
                ExpressionAttributeValues=to_item({":p": partition}),
                Limit=1,
                ReturnConsumedCapacity="TOTAL",
            )
            if response.get("Items"):
                return True
    return False


def _update_marker(
    client: DynamoDBClient, table_name: str, update: str, values: dict[str, Any]
) -> None:
    request: dict[str, Any] = {
        "TableName": table_name,
        "Key": _legacy_key(),
        "UpdateExpression": update,
        # Never once retired: retirement is for good.
        "ConditionExpression": "attribute_not_exists(retired_at)",
        "ReturnConsumedCapacity": "TOTAL",
    }
    if values:
        request["ExpressionAttributeValues"] = to_item(values)
    try:
        client.update_item(**request)
    except ClientError as error:
        if error_code(error) != "ConditionalCheckFailedException":
            raise


def record_legacy_shards_retired(client: DynamoDBClient, table_name: str, *, now: int) -> None:
    """Record that the legacy shards hold nothing for good (found so for LEGACY_QUIET_MS, or a
    table this release created)."""
    try:
        client.update_item(
            TableName=table_name,
            Key=_legacy_key(),
            UpdateExpression="SET retired_at = :now",
            # Written once: a sweep that overlaps another keeps the first record and its time.
            ConditionExpression="attribute_not_exists(retired_at)",
            ExpressionAttributeValues=to_item({":now": now}),
            ReturnConsumedCapacity="TOTAL",
        )
    except ClientError as error:
        if error_code(error) != "ConditionalCheckFailedException":
            raise
    _retired_tables.add(table_name)


def sweep_entries(
    client: DynamoDBClient,
    table_name: str,
    backlog: keys.SweepBacklog,
    *,
    before: str | None = None,
    after: str | None = None,
) -> Iterator[str]:
    """Sort keys of every entry of one kind of backlog (below `before`, or above `after`),
    oldest first across its shards (the legacy ones too until they are retired); read lazily,
    so a caller that stops early reads little more than it took."""
    if before is not None and after is not None:
        raise ValueError("one bound at a time")
    partitions = keys.sweep_partitions(backlog)
    if not legacy_shards_retired(client, table_name):
        partitions += keys.legacy_sweep_partitions(backlog)
    condition = "sweep_pk = :p"
    values: dict[str, Any] = {}
    if before is not None:
        condition += " AND sweep_sk < :before"
        values[":before"] = before
    if after is not None:
        condition += " AND sweep_sk > :after"
        values[":after"] = after
    requests: list[QueryInputTypeDef] = [
        {
            "TableName": table_name,
            "IndexName": keys.SWEEP_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": to_item({**values, ":p": shard}),
            "Limit": SHARD_PAGE,
            "ScanIndexForward": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        for shard in partitions
    ]
    for item in MergedQuery(client, requests, sort_key="sweep_sk", descending=False):
        yield item["sweep_sk"]["S"]


def _cursor_key(backlog: keys.SweepBacklog) -> dict[str, Any]:
    return to_item({keys.PK: keys.SWEEP_CURSOR_PK, keys.SK: backlog.value})


def sweep_cursor(client: DynamoDBClient, table_name: str, backlog: keys.SweepBacklog) -> str | None:
    """The sort key of the entry where the last sweep's pass over `backlog` stopped, its budget
    spent; None when the last pass went round (the next starts at the oldest). One GetItem."""
    item = client.get_item(
        TableName=table_name,
        Key=_cursor_key(backlog),
        ConsistentRead=True,
        ReturnConsumedCapacity="TOTAL",
    ).get("Item")
    return item["position"]["S"] if item and "position" in item else None


def move_sweep_cursor(
    client: DynamoDBClient,
    table_name: str,
    backlog: keys.SweepBacklog,
    position: str | None,
    *,
    now: int,
) -> None:
    """Record where a pass over `backlog` stopped (None: it went round). Unconditional, the last
    writer wins: it is a place to resume from, not a record of work done; two overlapping sweeps
    that move it back and forth still visit every entry within a few sweeps."""
    if position is None:
        client.delete_item(
            TableName=table_name, Key=_cursor_key(backlog), ReturnConsumedCapacity="TOTAL"
        )
        return
    client.put_item(
        TableName=table_name,
        Item=_cursor_key(backlog) | to_item({"position": position, "moved_at": now}),
        ReturnConsumedCapacity="TOTAL",
    )
