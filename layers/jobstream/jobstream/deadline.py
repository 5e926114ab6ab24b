"""Deadlines: when an outbound request, or the whole invocation, must be over (wall-clock).

A socket timeout bounds one read or write, never a request: a peer that sends a byte just
inside it holds the request as long as it likes. A `Deadline` is a point on the monotonic clock;
outbound HTTP aborts its connection there (`outbound/http.py`) and AWS calls start no attempt
that could end after the invocation's (`retries.py`).

The invocation's deadline is Lambda's remaining time less `ANSWER_MARGIN_MS` (the time to answer
once the work is done), set by the handler shells (`http/api.py`, `sqs_handler.py`,
`stream_handler.py`, `schedule_handler.py`) for the code they run, in a context variable:
threads doing the invocation's work take it with their context
(`contextvars.copy_context`); outside an invocation (the CLI, tests) there is none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import Any, Final, TypeVar

# What a handler needs after its last call: building and returning its answer.
ANSWER_MARGIN_MS: Final = 500

Answer = TypeVar("Answer")


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point on `time.monotonic()`'s clock."""

    at: float

    @classmethod
    def after_ms(cls, ms: float) -> Deadline:
        return cls(time.monotonic() + ms / 1000)

    def remaining_s(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def remaining_ms(self) -> float:
        return self.remaining_s() * 1000

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def less_ms(self, ms: float) -> Deadline:
        """This deadline, `ms` earlier (to keep time for what follows)."""
        return Deadline(self.at - ms / 1000)


_invocation: ContextVar[Deadline | None] = ContextVar("jobstream_invocation", default=None)


def invocation_deadline() -> Deadline | None:
    """When the current invocation's work must be over; None outside an invocation."""
    return _invocation.get()


@contextmanager
def invocation(remaining_ms: Callable[[], int] | None) -> Iterator[Deadline | None]:
    """Run the block under the invocation's deadline (`remaining_ms`: Lambda context's
    `get_remaining_time_in_millis`); without it (unknown), the deadline already set, if any."""
    if remaining_ms is None:
        yield _invocation.get()
        return
    deadline = Deadline.after_ms(remaining_ms() - ANSWER_MARGIN_MS)
    token = _invocation.set(deadline)
    try:
        yield deadline
    finally:
        _invocation.reset(token)


def within_invocation(
    handler: Callable[[Any, Any], Answer],
) -> Callable[[Any, Any], Answer]:
    """A Lambda handler run under its invocation's deadline (from its context's remaining
    time): the handler shells wrap every function with it."""

    @wraps(handler)
    def run(event: Any, context: Any) -> Answer:
        with invocation(getattr(context, "get_remaining_time_in_millis", None)):
            return handler(event, context)

    return run


def request_deadline(timeout_ms: float, *, reserve_ms: float = 0) -> Deadline:
    """An outbound request's deadline: `timeout_ms` from now, and no later than the invocation's
    less `reserve_ms` (what the caller still has to do once the request is over)."""
    own = Deadline.after_ms(timeout_ms)
    ending = invocation_deadline()
    if ending is None:
        return own
    return min(own, ending.less_ms(reserve_ms), key=lambda deadline: deadline.at)
