"""Make moto's DynamoDB backend atomic per request, as DynamoDB itself is.

moto applies a transaction item by item and, on a failed condition, restores a deep copy of the
table taken before it started; two threads interleaving there lose or duplicate writes. Real
DynamoDB serialises conflicting requests, so the local stack and the tests serialise them too;
and a cancelled transaction leaves no trace, at a cost that follows the transaction, not the
table (`make_transactions_cheap`).
"""

from __future__ import annotations

import copy
import functools
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_LOCK = threading.RLock()
_PATCHED = "_jobstream_atomic"


def _atomic(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return method(*args, **kwargs)

    return wrapper


def make_dynamodb_atomic() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoDBBackend, _PATCHED, False):
        return
    for name, member in list(vars(DynamoDBBackend).items()):
        if callable(member) and not name.startswith("_"):
            setattr(DynamoDBBackend, name, _atomic(member))
    # The whole request too: moto turns the stored items it returns into the answer after the
    # backend call, and another request must not change them meanwhile (moto updates items in
    # place, a cancelled transaction included until it is rolled back).
    DynamoHandler.call_action = _atomic(DynamoHandler.call_action)  # type: ignore[method-assign]
    setattr(DynamoDBBackend, _PATCHED, True)
    make_transactions_cheap()


def make_transactions_cheap() -> None:
    """All-or-nothing transactions whose cost does not grow with the table.

    moto rolls a cancelled transaction back by restoring a deep copy of every table it touches,
    taken before it starts: a transaction costs as much as the tables are large. Here only the
    items the transaction names are copied (at most 100), moto applies it without copying any
    table, and whatever stops it (a failed condition on any item, an invalid item half-way, a
    refused request) puts exactly those items back, as DynamoDB leaves no trace of a cancelled
    transaction. The lock above keeps every other request out meanwhile.
    """
    from moto.dynamodb import models

    backend = models.DynamoDBBackend
    if getattr(backend, "_jobstream_cheap", False):
        return
    original = backend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        touched = _snapshot(self, transact_items)
        with _no_table_copies(models):
            try:
                original(self, transact_items)
            except BaseException:
                _restore(touched)
                raise

    backend.transact_write_items = _atomic(transact_write_items)  # type: ignore[method-assign]
    backend._jobstream_cheap = True  # type: ignore[attr-defined]


@dataclass
class _Touched:
    """One item a transaction names, as it was before: None when it did not exist."""

    table: Any
    hash_key: Any
    range_key: Any
    item: Any
    partition_existed: bool
    stream_length: int | None


def _snapshot(backend: Any, transact_items: list[dict[str, Any]]) -> list[_Touched]:
    from moto.dynamodb.models.dynamo_type import DynamoType

    touched: list[_Touched] = []
    for entry in transact_items:
        for op_type, op in entry.items():
            table = backend.tables.get(op.get("TableName"))
            attributes = op.get("Item") if op_type == "Put" else op.get("Key")
            if table is None or not isinstance(attributes, dict):
                continue  # moto refuses it before writing anything
            try:
                hash_key = DynamoType(attributes[table.hash_key_attr])
                range_key = (
                    DynamoType(attributes[table.range_key_attr])
                    if table.range_key_attr is not None
                    else None
                )
            except (KeyError, TypeError, AttributeError):
                continue
            # Looked up without moto's get_item, which adds an empty partition for a new key.
            partition = table.items.get(hash_key)
            current = partition
            if range_key is not None:
                current = partition.get(range_key) if partition is not None else None
            shard = table.stream_shard
            touched.append(
                _Touched(
                    table=table,
                    hash_key=hash_key,
                    range_key=range_key,
                    # moto updates items in place: keep a copy, not the item itself.
                    item=copy.deepcopy(current),
                    partition_existed=partition is not None,
                    stream_length=len(shard.items) if shard is not None else None,
                )
            )
    return touched


def _restore(touched: list[_Touched]) -> None:
    # In reverse: the first snapshot of an item is the state before the transaction.
    for entry in reversed(touched):
        table = entry.table
        if entry.range_key is None:
            if entry.item is None:
                table.items.pop(entry.hash_key, None)
            else:
                table.items[entry.hash_key] = entry.item
        else:
            partition = table.items.get(entry.hash_key)
            if entry.item is not None:
                table.items[entry.hash_key][entry.range_key] = entry.item
            elif partition is not None:
                partition.pop(entry.range_key, None)
        if not entry.partition_existed and not table.items.get(entry.hash_key, True):
            del table.items[entry.hash_key]  # a partition only the transaction had opened
        if entry.stream_length is not None and table.stream_shard is not None:
            # A cancelled transaction emits no stream records.
            del table.stream_shard.items[entry.stream_length :]


@contextmanager
def _no_table_copies(models: Any) -> Iterator[None]:
    """moto's own backup copies of whole tables become the tables themselves (no copy)."""
    from moto.dynamodb.models.table import Table

    shim = types.SimpleNamespace(
        deepcopy=lambda value, *args: (
            value if isinstance(value, Table) else copy.deepcopy(value, *args)
        )
    )
    setattr(models, "copy", shim)  # noqa: B010 - the module moto's code looks `copy` up in
    try:
        yield
    finally:
        setattr(models, "copy", copy)  # noqa: B010
