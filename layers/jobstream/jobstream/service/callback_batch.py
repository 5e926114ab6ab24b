"""One invocation of the callbacks function: a batch of queue messages, delivered concurrently,
within the invocation's time, answered as a partial batch response.

- Every message is delivered in its own thread (a callback is one HTTP POST: I/O), so a batch of
  10 takes about as long as its slowest receiver, not the sum of them.
- A message is claimed only while the invocation has the time for a whole attempt left (the
  callback timeout and a margin for recording the outcome); the others are handed back at once
  (visibility 0) and reported as batch item failures, so SQS delivers them again.
- No attempt outlives the invocation: its POST is over by its deadline, never later than the
  invocation's less the outcome's margin (outbound/http.py aborts a receiver that holds the
  connection), and each AWS call starts only with the time to end (retries.py), so the function
  waits for every thread and returns before its timeout. A thread left running would be frozen
  with the environment and resume in a later invocation, holding a claim nobody can settle.
- A receiver's outage is no function error: a retry is reported as a batch item failure (its
  message comes back after the backoff it was given), counted (`callbacks_retried`) and logged
  as a warning, and a batch of nothing but retries is a normal answer. Only when every message
  of a batch raised does the invocation fail, so that the function's error alarm sees a fault
  of the function itself (DynamoDB refused every write, a bug).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import suppress
from enum import StrEnum
from typing import Final

from jobstream import observability
from jobstream.config.settings import ConfigurationError
from jobstream.deadline import Deadline, invocation
from jobstream.errors import JobstreamError
from jobstream.queue import QueueMessage
from jobstream.runtime import Runtime
from jobstream.service.callbacks import OUTCOME_MARGIN_MS, RetryLaterError, handle_message

__all__ = ["OUTCOME_MARGIN_MS", "BatchFailedError", "Result", "deliver_batch"]

logger = logging.getLogger(__name__)

# One thread per message of a batch (the event source mapping's BatchSize is 10).
MAX_CONCURRENT: Final = 10


class Result(StrEnum):
    DONE = "done"  # delivered, dead-lettered, or nothing to do: the message may go
    RETRY = "retry"  # not delivered yet: the message comes back after its backoff
    DEFERRED = "deferred"  # not attempted (too little time left): back at once
    FAILED = "failed"  # raised: back after the queue's visibility timeout


class BatchFailedError(JobstreamError):
    """Every message of the batch raised: the invocation fails (and the error alarm sees it)."""


def deliver_batch(
    rt: Runtime,
    messages: Sequence[QueueMessage],
    remaining_ms: Callable[[], int] | None = None,
) -> list[str]:
    """Deliver a batch; the ids of the messages SQS must keep (the partial batch response)."""
    if not messages:
        return []
    # Clients are created once, before the threads share them (threads that each met a client
    # not yet made would each make one).
    rt.store.connect()
    rt.callback_queue.client  # noqa: B018
    attempt_ms = rt.settings.callback_timeout_ms + OUTCOME_MARGIN_MS
    with invocation(remaining_ms) as deadline:
        # The registry too is read before the threads need it: a cold or failing read is made
        # once, not by each thread (each then finds it read, or its failure moments ago); what
        # failed is met again, and answered, by each message.
        with suppress(ConfigurationError):
            rt.tenants()
        pool = ThreadPoolExecutor(max_workers=min(MAX_CONCURRENT, len(messages)))
        futures: dict[Future[Result], QueueMessage] = {}
        try:
            for message in messages:
                # Each message in a copy of the invocation's context: its log keys are its own,
                # the invocation's deadline is shared.
                context = contextvars.copy_context()
                futures[pool.submit(context.run, _one, rt, message, deadline, attempt_ms)] = message
            # Every attempt is over by the deadline: this waits for them all (the bound is a
            # safety net, reported below).
            done, _ = wait(futures, timeout=None if deadline is None else deadline.remaining_s())
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    results = {message.message_id: _result(future, done) for future, message in futures.items()}
    if all(result is Result.FAILED for result in results.values()):
        raise BatchFailedError(f"all {len(results)} callback messages of the batch failed")
    return [message_id for message_id, result in results.items() if result is not Result.DONE]


def _result(future: Future[Result], done: set[Future[Result]]) -> Result:
    if future in done:
        return future.result()
    # Every step of an attempt is bounded by the deadline: one still running is a defect
    # (something blocking that no deadline reaches); its message comes back and finds it held.
    logger.error("callback attempt still running at the invocation's deadline")
    observability.count("callbacks_deferred")
    return Result.DEFERRED


def _one(rt: Runtime, message: QueueMessage, deadline: Deadline | None, attempt_ms: int) -> Result:
    if deadline is not None and deadline.remaining_ms() < attempt_ms:
        # Not claimed: another invocation, with the time for it, takes it at once.
        observability.count("callbacks_deferred")
        try:
            rt.callback_queue.delay(message.receipt_handle, 0)
        except Exception:
            logger.warning("could not hand a deferred callback message back", exc_info=True)
        return Result.DEFERRED
    try:
        handle_message(rt, message.body, message.receipt_handle, message.receive_count)
    except RetryLaterError as retry:
        # The consumer did not take it (down, slow, 429/5xx): its message returns after the
        # backoff. Expected in an outage: a warning and a metric, not a function error.
        logger.warning("callback not delivered, will retry: %s", retry)
        return Result.RETRY
    except Exception:
        logger.exception("callback message failed", extra={"message_id": message.message_id})
        observability.count("callbacks_failed")
        return Result.FAILED
    return Result.DONE
