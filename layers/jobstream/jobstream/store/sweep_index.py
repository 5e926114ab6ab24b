"""Reading the sparse sweep index: one kind of backlog over its shards, oldest first."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from jobstream.store import keys
from jobstream.store.codec import to_item
from jobstream.store.shards import MergedQuery

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

# Entries read per query of one shard: index entries are keys only (~100 bytes), so a read ahead
# that the sweep's budget leaves unused costs next to nothing.
SHARD_PAGE: Final = 50


def sweep_entries(
    client: DynamoDBClient,
    table_name: str,
    backlog: keys.SweepBacklog,
    *,
    before: str | None = None,
) -> Iterator[str]:
    """Sort keys of every entry of one kind of backlog (below `before`), oldest first across
    its shards; read lazily, so a caller that stops early reads little more than it took."""
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
        for shard in keys.sweep_partitions(backlog)
    ]
    for item in MergedQuery(client, requests, sort_key="sweep_sk", descending=False):
        yield item["sweep_sk"]["S"]
