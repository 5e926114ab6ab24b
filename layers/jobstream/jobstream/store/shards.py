"""Reading a sharded index key as if it were one: a lazy merge of one query per shard.

Every shard is a key-ordered query; the merge keeps each live shard's next item at hand and
yields the smallest (or largest) of them, so items come out in the same order one unsharded
partition would give, and a shard is read again only when its last item at hand is taken.

A merge may be given a read budget (Query calls and items read): it then stops where its next
read would exceed it, at a point where one unsharded read could have stopped too (every item
above it yielded, none below), so its caller can resume there with a new merge.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef

# Concurrent first reads (botocore keeps 10 connections per client: stay below).
FIRST_READS: Final = 8


@dataclass(frozen=True, slots=True)
class ReadBudget:
    """What one merge may read: at most `queries` Query calls, asking for at most `items`
    items in all (the sum of their `Limit`s: what DynamoDB may evaluate and bill)."""

    queries: int
    items: int


class _Allowance:
    """What is left of a merge's budget (unbounded without one). Used from one thread at a
    time: the first reads are charged before they are made in parallel."""

    __slots__ = ("items", "queries", "shards")

    def __init__(self, budget: ReadBudget | None, shards: int) -> None:
        self.queries = budget.queries if budget else None
        self.items = budget.items if budget else None
        self.shards = shards

    def charge(self, limits: Sequence[int | None]) -> None:
        """The first reads, one per shard (checked to fit when the merge was made)."""
        if self.queries is not None and self.items is not None:
            self.queries -= len(limits)
            self.items -= sum(limit or 0 for limit in limits)

    def grant(self, wanted: int | None) -> int | None:
        """The `Limit` of a shard's next read: `wanted` (None: the request's own), at most an
        even share of the items left, so that every shard may read again while queries are
        left (the shards that run out first take them); 0 when the budget has no read left."""
        if self.queries is None or self.items is None:
            return wanted
        if self.queries < 1 or self.items < 1 or wanted is None:
            return 0
        share = self.items // min(self.queries, self.shards)
        granted = min(wanted, max(1, share))
        self.queries -= 1
        self.items -= granted
        return granted


class _Shard:
    __slots__ = ("done", "items", "read_size", "request", "sort_key")

    def __init__(self, request: QueryInputTypeDef, sort_key: str) -> None:
        self.request = request
        self.sort_key = sort_key
        self.items: deque[dict[str, Any]] = deque()
        self.done = False
        self.read_size = request.get("Limit")


class MergedQuery:
    """Items of several partitions (of one index, or more) in one key order.

    `requests` are complete Query requests, one per shard, sharing the direction and the order
    of their sort keys: `sort_key` names it (a string or number attribute, its values unique
    across the shards), one name for all or one per request (the same order kept under other
    names, in another index); each request's `Limit` is the size of its reads. Reads are lazy:
    iterating takes what the caller consumes plus at most one read ahead per shard.

    With a `budget`, every request must have a `Limit` of at least 1, and one read of each
    must fit in it; later reads ask for their `Limit` or an even share of what is left over
    the shards, whichever is less. The merge ends early (`stopped_short`) when a shard's next
    item is not at hand and the budget cannot read it, since any item of the others might
    follow it: every item above the last one yielded has then been yielded, and none below it.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        requests: Sequence[QueryInputTypeDef],
        *,
        sort_key: str | Sequence[str],
        descending: bool,
        budget: ReadBudget | None = None,
    ) -> None:
        limits = [request.get("Limit", 0) for request in requests]
        if budget is not None and (
            min(limits, default=1) < 1
            or len(requests) > budget.queries
            or sum(limits) > budget.items
        ):
            raise ValueError("one read of each shard must fit in the budget")
        sort_keys = [sort_key] * len(requests) if isinstance(sort_key, str) else list(sort_key)
        if len(sort_keys) != len(requests):
            raise ValueError("one sort key name for all requests, or one per request")
        self._client = client
        self._shards = [
            _Shard(request.copy(), name) for request, name in zip(requests, sort_keys, strict=True)
        ]
        self._descending = descending
        self._allowance = _Allowance(budget, len(requests))
        self._started = False
        self.stopped_short = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if not self._started:
            self._started = True
            self._read_first()
        while not self.stopped_short:
            if any(not shard.items and not shard.done for shard in self._shards):
                self.stopped_short = True  # a shard's next item is out of the budget's reach
                return
            live = [shard for shard in self._shards if shard.items]
            if not live:
                return
            heads = [_order_value(shard.items[0][shard.sort_key]) for shard in live]
            head = max(heads) if self._descending else min(heads)
            shard = live[heads.index(head)]
            yield shard.items.popleft()
            # Keep the invariant: a shard with items left has its next one at hand.
            self._fill(shard)

    def _read_first(self) -> None:
        limits = [shard.read_size for shard in self._shards]
        self._allowance.charge(limits)
        if len(self._shards) == 1:
            self._read(self._shards[0], limits[0])
        else:
            # Every shard's first read, a few at a time: the latency of ~n/8 reads, not n.
            with ThreadPoolExecutor(max_workers=min(FIRST_READS, len(self._shards))) as pool:
                list(pool.map(self._read, self._shards, limits))
        for shard in self._shards:
            self._fill(shard)

    def _fill(self, shard: _Shard) -> None:
        # A filtered read may match nothing and still not be the shard's last: read on.
        while not shard.items and not shard.done:
            limit = self._allowance.grant(shard.read_size)
            if limit == 0:
                return  # out of budget: the merge stops at this shard
            self._read(shard, limit)

    def _read(self, shard: _Shard, limit: int | None) -> None:
        request = shard.request if limit is None else {**shard.request, "Limit": limit}
        response = self._client.query(**request)
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
