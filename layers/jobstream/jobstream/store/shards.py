"""Reading a sharded index key as if it were one: a lazy merge of one query per shard.

Every shard is a key-ordered query; the merge keeps each live shard's next item at hand and
yields the smallest (or largest) of them, so items come out in the same order one unsharded
partition would give, and a shard is read again only when its last item at hand is taken.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

# Concurrent first reads (botocore keeps 10 connections per client: stay below).
FIRST_READS: Final = 8


class _Shard:
    __slots__ = ("done", "items", "request")

    def __init__(self, request: QueryInputTypeDef) -> None:
        self.request = request
        self.items: deque[dict[str, Any]] = deque()
        self.done = False


class MergedQuery:
    """Items of several partitions of one index in one key order.

    `requests` are complete Query requests, one per shard, sharing the index, the direction and
    the sort key named `sort_key` (a string or number attribute, unique across the shards);
    each request's `Limit` is the size of its reads. Reads are lazy: iterating takes what the
    caller consumes plus at most one read ahead per shard.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        requests: Sequence[QueryInputTypeDef],
        *,
        sort_key: str,
        descending: bool,
    ) -> None:
        self._client = client
        self._shards = [_Shard(request.copy()) for request in requests]
        self._sort_key = sort_key
        self._descending = descending
        self._started = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if not self._started:
            self._started = True
            if len(self._shards) == 1:
                self._fill(self._shards[0])
            else:
                # Every shard's first read, a few at a time: the latency of ~n/8 reads, not n.
                with ThreadPoolExecutor(max_workers=min(FIRST_READS, len(self._shards))) as pool:
                    list(pool.map(self._fill, self._shards))
        while True:
            live = [shard for shard in self._shards if shard.items]
            if not live:
                return
            heads = [_order_value(shard.items[0][self._sort_key]) for shard in live]
            head = max(heads) if self._descending else min(heads)
            shard = live[heads.index(head)]
            yield shard.items.popleft()
            # Keep the invariant: a shard with items left has its next one at hand.
            self._fill(shard)

    def _fill(self, shard: _Shard) -> None:
        # A filtered read may match nothing and still not be the shard's last: read on.
        while not shard.items and not shard.done:
            response = self._client.query(**shard.request)
            shard.items.extend(response.get("Items", []))
            last_key = response.get("LastEvaluatedKey")
            if last_key:
                shard.request["ExclusiveStartKey"] = last_key
            else:
                shard.done = True


def _order_value(attribute: Mapping[str, Any]) -> Any:
    """A sort key attribute as DynamoDB orders it: strings by code point, numbers by value."""
    if "N" in attribute:
        return Decimal(attribute["N"])
    return attribute["S"]
