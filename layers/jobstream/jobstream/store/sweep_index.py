"""Reading the sparse sweep index: one partition per kind of backlog, oldest first."""

from __future__ import annotations

from typing import Any

from jobstream.store import keys
from jobstream.store.codec import to_item


def sweep_page(
    client: Any,
    table_name: str,
    partition: str,
    *,
    before: str | None = None,
    limit: int,
    start_key: dict[str, Any] | None = None,
) -> tuple[list[str], dict[str, Any] | None]:
    """Sort keys of one page of a sweep partition (below `before`), and where the next starts."""
    condition = "sweep_pk = :p"
    values: dict[str, Any] = {":p": partition}
    if before is not None:
        condition += " AND sweep_sk < :before"
        values[":before"] = before
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": keys.SWEEP_INDEX,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": to_item(values),
        "Limit": limit,
        "ScanIndexForward": True,
        "ReturnConsumedCapacity": "TOTAL",
    }
    if start_key:
        request["ExclusiveStartKey"] = start_key
    response = client.query(**request)
    sort_keys = [item["sweep_sk"]["S"] for item in response.get("Items", [])]
    return sort_keys, response.get("LastEvaluatedKey")
