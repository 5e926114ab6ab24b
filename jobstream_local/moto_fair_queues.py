"""SQS fair queues in moto: a standard queue serves its message groups in turn.

On AWS, a standard queue whose messages carry a `MessageGroupId` is a fair queue: when one group
(a tenant) has a backlog, SQS hands out the other groups' messages ahead of it, so a quiet
tenant's job does not wait behind a noisy tenant's thousand. moto hands out a standard queue's
messages in arrival order. Here its visible messages are handed out round robin: the first
message of each group, the group served longest ago (or never) first, then each group's second,
and so on; each group's own messages in arrival order. FIFO queues keep moto's order (their
groups have rules of their own).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_PATCHED = "_jobstream_fair_queues"
# Per queue: when each message group was last handed a message (a counter of receives).
_SERVED = "_jobstream_served"
_NEVER = -1


def fair_order(messages: Iterable[Any], served: Mapping[Any, int]) -> list[Any]:
    """Messages in turns across their groups (`group_id`; None is a group too): by rank within
    the group, then the group least recently `served` first, then arrival."""
    rank_in_group: dict[Any, int] = {}
    ranked = []
    for arrival, message in enumerate(messages):
        rank = rank_in_group.get(message.group_id, 0)
        rank_in_group[message.group_id] = rank + 1
        ranked.append(((rank, served.get(message.group_id, _NEVER), arrival), message))
    ranked.sort(key=lambda entry: entry[0])
    return [message for _, message in ranked]


def _served(queue: Any) -> dict[Any, int]:
    served: dict[Any, int] | None = getattr(queue, _SERVED, None)
    if served is None:
        served = {}
        setattr(queue, _SERVED, served)
    return served


def _recording_whom_it_served(receive: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    ticks = itertools.count()

    @functools.wraps(receive)
    def receive_message(backend: Any, queue_name: str, *args: Any, **kwargs: Any) -> list[Any]:
        received = receive(backend, queue_name, *args, **kwargs)
        served = _served(backend.get_queue(queue_name))
        for message in received:
            served[message.group_id] = next(ticks)
        return received

    return receive_message


def make_standard_queues_fair() -> None:
    from moto.sqs.models import Queue, SQSBackend

    if getattr(Queue, _PATCHED, False):
        return
    in_arrival_order = Queue.messages.fget  # type: ignore[attr-defined]

    def messages(queue: Any) -> list[Any]:
        visible = in_arrival_order(queue)
        return visible if queue.fifo_queue else fair_order(visible, _served(queue))

    Queue.messages = property(messages)  # type: ignore[assignment,method-assign]
    SQSBackend.receive_message = _recording_whom_it_served(SQSBackend.receive_message)  # type: ignore[method-assign]
    setattr(Queue, _PATCHED, True)
