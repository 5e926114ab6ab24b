"""Make moto's SQS cost what SQS costs: not a pass over the whole queue per message.

moto builds every attribute of a queue, message counts included (each a pass over all of its
messages), whenever it reads any one of them: per received message (for the retention period),
per sent message (for content-based deduplication) and three times per name in
GetQueueAttributes. With a backlog of a thousand jobs, every receive walked the queue a thousand
times. And every message's visibility check read the clock through a datetime built for the
purpose. Here a queue's attributes are a mapping that computes an attribute when it is read, with
the same value moto would give; the counts are only computed when they are asked for; and the
current time is read from `time.time()`.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_PATCHED = "_jobstream_lazy_attributes"


class QueueAttributes(Mapping[str, Any]):
    """moto's `Queue.attributes`, computed per name on first read."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        self._names = dict.fromkeys(names)  # ordered, like moto's dict
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._values:
            self._values[name] = self._compute(name)
        return self._values[name]

    def _compute(self, name: str) -> Any:
        from moto.core.utils import camelcase_to_underscores

        queue = self._queue
        if name == "Policy" and queue.policy:
            return queue.policy
        if name == "RedrivePolicy" and queue.redrive_policy:
            return json.dumps(queue.redrive_policy)
        value = getattr(queue, camelcase_to_underscores(name))
        return str(value).lower() if isinstance(value, bool) else value

    def __contains__(self, name: object) -> bool:
        return name in self._names  # Mapping's default would compute the value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _as_dict(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return dict(method(*args, **kwargs))  # "All" hands moto's mapping on as the answer

    return wrapper


def _read_the_clock_directly(models: Any) -> None:
    """moto's `unix_time()` is the epoch difference of two datetimes, the same number as
    `time.time()`; the SQS model reads it for every message it looks at."""
    moto_unix_time: Callable[..., float] = models.unix_time

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else moto_unix_time(dt)

    def unix_time_millis(dt: Any = None) -> float:
        return unix_time(dt) * 1000.0

    models.unix_time = unix_time
    models.unix_time_millis = unix_time_millis


def make_sqs_cheap() -> None:
    from moto.sqs import models
    from moto.sqs.models import Queue, SQSBackend

    if getattr(SQSBackend, _PATCHED, False):
        return
    Queue.moto_attributes = Queue.attributes  # type: ignore[attr-defined]  # kept for comparison
    Queue.attributes = property(QueueAttributes)  # type: ignore[assignment,method-assign]
    _read_the_clock_directly(models)
    SQSBackend.get_queue_attributes = _as_dict(SQSBackend.get_queue_attributes)  # type: ignore[method-assign]
    setattr(SQSBackend, _PATCHED, True)
