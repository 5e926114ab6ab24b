"""Make moto refuse what DynamoDB refuses for size and number range, by DynamoDB's own rules.

DynamoDB answers ValidationException to an item larger than 400 KB (409,600 bytes, counted by
AWS's rules: `jobstream.store.item_size`) and to a number of more than 38 significant digits or
out of its range (1E-130 to 9.99E+125 in magnitude). moto counts an item its own way (a number
as its text, no list or map overhead) against 405,000 bytes, and stores any number: the local
stack would refuse items AWS stores and store items and numbers AWS refuses. Here:

- any number anywhere in a request is checked (the whole request is refused, as on AWS);
- a put item (PutItem, a Put of TransactWriteItems, a PutRequest of BatchWriteItem) is sized
  before anything is written;
- an update is sized on the item it produces, and an item it would make too large is left as
  it was ("Item size to update has exceeded the maximum allowed size").
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from jobstream.store.item_size import MAX_ITEM_BYTES, first_number_refusal, item_size
from jobstream_local.moto_names import refuse_requests

_PATCHED: Final = "_jobstream_limits_checked"
ITEM_TOO_LARGE: Final = "Item size has exceeded the maximum allowed size"


def put_items(request: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every item a write request puts whole."""
    if isinstance(request.get("Item"), Mapping):
        yield request["Item"]
    for entry in request.get("TransactItems") or []:
        put = entry.get("Put") if isinstance(entry, Mapping) else None
        if isinstance(put, Mapping) and isinstance(put.get("Item"), Mapping):
            yield put["Item"]
    for writes in (request.get("RequestItems") or {}).values():
        for write in writes if isinstance(writes, list) else []:
            put = write.get("PutRequest") if isinstance(write, Mapping) else None
            if isinstance(put, Mapping) and isinstance(put.get("Item"), Mapping):
                yield put["Item"]


def request_refusal(request: Any) -> str | None:
    """Why DynamoDB refuses this request for a number or an item size, or None."""
    refusal = first_number_refusal(request)
    if refusal is not None:
        return f"Attempting to store a number DynamoDB cannot hold: {refusal}"
    if isinstance(request, Mapping) and any(
        item_size(item) > MAX_ITEM_BYTES for item in put_items(request)
    ):
        return ITEM_TOO_LARGE
    return None


def _sized_update(execute: Callable[..., None]) -> Callable[..., None]:
    """An update expression applied only when the item it produces fits (moto applies updates
    in place, item attribute by attribute: the item is put back as it was when it does not)."""

    @functools.wraps(execute)
    def wrapper(self: Any, node: Any = None) -> None:
        from moto.dynamodb.exceptions import ItemSizeTooLarge

        if node is not None:  # a nested step of the one update being applied
            execute(self, node)
            return
        before = copy.deepcopy(self.item.attrs)
        execute(self)
        if item_size(self.item.to_json()["Attributes"]) > MAX_ITEM_BYTES:
            self.item.attrs = before
            # moto's update_item answers it as "Item size to update has exceeded ...".
            raise ItemSizeTooLarge

    return wrapper


def enforce_item_limits() -> None:
    from moto.dynamodb.models.dynamo_type import LimitedSizeDict
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor

    if getattr(UpdateExpressionExecutor, _PATCHED, False):
        return
    refuse_requests(_PATCHED, request_refusal)
    # moto's own check counts otherwise, against another limit: the checks here replace it.
    LimitedSizeDict.__setitem__ = dict.__setitem__  # type: ignore[method-assign]
    UpdateExpressionExecutor.execute = _sized_update(UpdateExpressionExecutor.execute)  # type: ignore[method-assign]
    setattr(UpdateExpressionExecutor, _PATCHED, True)
