"""Reading the sparse sweep index: one kind of backlog over its shards, oldest first.

Upgrade from the release that wrote every kind over `keys.LEGACY_SWEEP_SHARDS` shards: each kind
is now written over its own count (`keys.SWEEP_SHARDS`), and nothing writes the shards above it.
Entries left there are still read, with the rest, until a sweep finds every one of those shards
empty and records so in one item (`retire_legacy_shards`); from then on they are never read.
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


def _legacy_key() -> dict[str, Any]:
    return to_item({keys.PK: keys.LEGACY_SHARDS_PK, keys.SK: keys.LEGACY_SHARDS_SK})


def legacy_shards_retired(client: DynamoDBClient, table_name: str) -> bool:
    """Whether the legacy shards are known empty for good: one GetItem until seen so."""
    if table_name in _retired_tables:
        return True
    # Eventually consistent: a record not seen yet only costs one more read of the legacy shards.
    found = client.get_item(
        TableName=table_name, Key=_legacy_key(), ReturnConsumedCapacity="TOTAL"
    ).get("Item")
    if found is not None:
        _retired_tables.add(table_name)
    return found is not None


def retire_legacy_shards(client: DynamoDBClient, table_name: str, *, now: int) -> bool:
    """The sweep's look at the legacy shards of every kind: True when they are retired (before,
    or now: none holds an entry, due or not, and that is recorded); False while one holds an
    entry. Reads one entry at most of each shard, and stops at the first that has one."""
    if legacy_shards_retired(client, table_name):
        return True
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
                return False
    record_legacy_shards_retired(client, table_name, now=now)
    return True


def record_legacy_shards_retired(client: DynamoDBClient, table_name: str, *, now: int) -> None:
    """Record that the legacy shards hold nothing (found so, or a table this release created)."""
    try:
        client.put_item(
            TableName=table_name,
            Item={**_legacy_key(), **to_item({"retired_at": now})},
            # Written once: a sweep that overlaps another keeps the first record and its time.
            ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": keys.PK},
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
) -> Iterator[str]:
    """Sort keys of every entry of one kind of backlog (below `before`), oldest first across
    its shards (the legacy ones too until they are retired); read lazily, so a caller that
    stops early reads little more than it took."""
    partitions = keys.sweep_partitions(backlog)
    if not legacy_shards_retired(client, table_name):
        partitions += keys.legacy_sweep_partitions(backlog)
    condition = "sweep_pk = :p"
    values: dict[str, Any] = {}
    if before is not None:
        condition += " AND sweep_sk < :before"
        values[":before"] = before
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
