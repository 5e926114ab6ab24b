"""Make moto's DynamoDB backend atomic per request, as DynamoDB itself is.

moto applies a transaction item by item and, on a failed condition, restores a deep copy of the
table taken before it started; two threads interleaving there lose or duplicate writes. Real
DynamoDB serialises conflicting requests, so the local stack and the tests serialise them too.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
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

    if getattr(DynamoDBBackend, _PATCHED, False):
        return
    for name, member in list(vars(DynamoDBBackend).items()):
        if callable(member) and not name.startswith("_"):
            setattr(DynamoDBBackend, name, _atomic(member))
    setattr(DynamoDBBackend, _PATCHED, True)
    make_transactions_cheap()


def make_transactions_cheap() -> None:
    """moto copies every table a transaction touches (to roll back a failed one), which makes a
    transaction cost grow with the table. Under the lock above, conditions can be checked first
    and the transaction refused before anything is written; then no rollback, and no copy, is
    needed. (A malformed expression failing half-way would not be rolled back: jobstream never
    sends one, and the tests would show it.)"""
    import copy
    import types

    from moto.dynamodb import models
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import TransactionCanceledException
    from moto.dynamodb.models.table import Table

    backend = models.DynamoDBBackend
    if getattr(backend, "_jobstream_cheap", False):
        return
    original = backend.transact_write_items

    def key_of(self: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
        if op_type != "Put":
            key: dict[str, Any] = op["Key"]
            return key
        table = self.get_table(op["TableName"])
        attrs = op["Item"]
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
        return key

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        reasons: list[tuple[Any, Any, Any]] = []
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            condition = op.get("ConditionExpression")
            if condition is None or op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                reasons.append((None, None, None))
                continue
            current = self.get_item(op["TableName"], key_of(self, op_type, op))
            holds = get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            ).expr(current)
            reasons.append(
                (None, None, None)
                if holds
                else ("ConditionalCheckFailed", "The conditional request failed", None)
            )
        if any(code is not None for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        # Conditions hold: let moto apply it without copying whole tables.
        shim = types.SimpleNamespace(
            deepcopy=lambda value, *a: (
                value if isinstance(value, Table) else copy.deepcopy(value, *a)
            )
        )
        setattr(models, "copy", shim)  # noqa: B010 - the module moto's code looks `copy` up in
        try:
            original(self, transact_items)
        finally:
            setattr(models, "copy", copy)  # noqa: B010

    backend.transact_write_items = _atomic(transact_write_items)  # type: ignore[method-assign]
    backend._jobstream_cheap = True  # type: ignore[attr-defined]
