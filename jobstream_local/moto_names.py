"""Make moto refuse an empty attribute name, as DynamoDB does.

DynamoDB answers ValidationException ("Empty attribute name") to any request that carries an
attribute name that is the empty string: a top-level attribute, a map key at any depth of a value,
a key, an ExclusiveStartKey, an ExpressionAttributeNames value. moto stores such an item and then
cannot serialise it, so every later read of it fails: the local stack would hide the write-time
refusal production gives and break somewhere else instead. Here the request is refused.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

_PATCHED: Final = "_jobstream_names_checked"
# The DynamoDB operations that carry items, keys, attribute names or numbers.
OPERATIONS: Final = (
    "put_item",
    "update_item",
    "delete_item",
    "get_item",
    "batch_get_item",
    "batch_write_item",
    "transact_write_items",
    "transact_get_items",
    "query",
    "scan",
)


def holds_empty_name(value: Any) -> bool:
    """Whether a request body holds an empty key or an empty ExpressionAttributeNames value.

    An empty key can only be an attribute name (operation parameters and type tags never are).
    """
    pending = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            if "" in current:
                return True
            names = current.get("ExpressionAttributeNames")
            if isinstance(names, dict) and "" in names.values():
                return True
            pending.extend(current.values())
        elif isinstance(current, list):
            pending.extend(current)
    return False


def _empty_name(body: Any) -> str | None:
    return "Empty attribute name" if holds_empty_name(body) else None


def _checked(
    action: Callable[[Any], Any], refusal: Callable[[Any], str | None]
) -> Callable[[Any], Any]:
    @functools.wraps(action)
    def wrapper(self: Any) -> Any:
        from moto.dynamodb.exceptions import MockValidationException

        refused = refusal(getattr(self, "body", None))
        if refused is not None:
            raise MockValidationException(refused)
        return action(self)

    return wrapper


def refuse_requests(marker: str, refusal: Callable[[Any], str | None]) -> None:
    """Make moto answer ValidationException(`refusal(body)`) to every DynamoDB request of
    OPERATIONS whose body `refusal` finds fault with (once per `marker`)."""
    from moto.dynamodb.responses import DynamoHandler

    if getattr(DynamoHandler, marker, False):
        return
    for name in OPERATIONS:
        setattr(DynamoHandler, name, _checked(getattr(DynamoHandler, name), refusal))
    setattr(DynamoHandler, marker, True)


def refuse_empty_attribute_names() -> None:
    refuse_requests(_PATCHED, _empty_name)
