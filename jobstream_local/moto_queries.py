"""Make moto's DynamoDB queries cost what they cost on DynamoDB: the size of the answer.

moto answers every Query by sorting every item of the table and then filtering: a page of one
job's events costs as much as the whole table, and the local stack slows down as jobs pile up.
DynamoDB reads one partition. Here a table query reads only its partition, and an index query
walks the items without sorting them first (moto sorts the index's matches itself afterwards).
Results are unchanged: moto filters the candidates by the same key conditions and orders them.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

_PATCHED = "_jobstream_cheap_queries"
# Which table the running query is about, and how to list its candidates (per thread).
_SCOPE = threading.local()


def _partition(table: Any, hash_key: Any) -> Callable[[], list[Any]]:
    def items() -> list[Any]:
        stored = table.items.get(hash_key)  # .get: the table's defaultdict must not grow here
        if stored is None:
            return []
        return list(stored.values()) if table.range_key_attr else [stored]

    return items


def _unsorted(table: Any) -> Callable[[], list[Any]]:
    def items() -> list[Any]:
        if not table.range_key_attr:
            return list(table.items.values())
        return [item for partition in table.items.values() for item in partition.values()]

    return items


def make_queries_cheap() -> None:
    from moto.dynamodb.models.table import Table

    if getattr(Table, _PATCHED, False):
        return
    original_query = Table.query
    original_all_items = Table.all_items
    signature = inspect.signature(original_query)

    def all_items(self: Any) -> list[Any]:
        scope = getattr(_SCOPE, "current", None)
        if scope is not None and scope[0] is self:
            candidates: list[Any] = scope[1]()
            return candidates
        result: list[Any] = original_all_items(self)
        return result

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        arguments = signature.bind(self, *args, **kwargs).arguments
        hash_key = arguments.get("hash_key")
        if arguments.get("index_name") or hash_key is None:
            candidates = _unsorted(self)
        else:
            candidates = _partition(self, hash_key)
        previous = getattr(_SCOPE, "current", None)
        _SCOPE.current = (self, candidates)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            _SCOPE.current = previous

    Table.all_items = all_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]
    setattr(Table, _PATCHED, True)
