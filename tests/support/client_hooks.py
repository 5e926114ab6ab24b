"""A botocore event handler on a client for the length of a `with` block, and the DynamoDB
operations a service's client makes meanwhile."""

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


@contextmanager
def dynamodb_calls(client: Any) -> Iterator[list[str]]:
    """The DynamoDB operations `client` (a service's) makes inside the block, in order."""
    calls: list[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    with hooked(client, "before-call.dynamodb", record, "test-calls"):
        yield calls
