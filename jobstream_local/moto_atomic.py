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
