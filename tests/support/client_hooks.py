"""A botocore event handler on a client for the length of a `with` block."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def hooked(client: Any, event: str, handler: Callable[..., Any], name: str) -> Iterator[None]:
    """`handler` on `client`'s `event` (e.g. "before-call.dynamodb") inside the block."""
    events = client.meta.events
    events.register(event, handler, unique_id=name)
    try:
        yield
    finally:
        events.unregister(event, unique_id=name)
