"""The hand-off after every commit, off the request path: the table's stream (DynamoDB Streams)
feeds the dispatcher, which sends each new job to the work queue and each new callback to the
callback queue. No write path waits for SQS.

The template's filter (DispatcherFunction, `FilterCriteria`) wakes the dispatcher only for what
it hands off; the same test is made here (store/stream_images.py), so any other record is
skipped:

- a job item as admission writes it: `event_count` 1, never re-dispatched (`dispatched_at`
  absent; the sweep sends those itself) and without progress (`progress_stage` absent: a queued
  job's progress is a slot wait's note, `note_waiting`, a change of a job already sent whose
  slot's release sends it again). INSERT, or MODIFY when it replaces an expired job;
- an event item carrying a callback nobody has tried or re-sent yet: `state` pending, `attempts`
  0, no `resent_at` (the sweep's and a redrive's own sends set it). INSERT, or MODIFY when it
  takes the slot of an earlier job's event under the same key.

A duplicate message is harmless (claims are conditional); a lost one is re-sent by the sweep.
A send that fails is reported as a batch item failure, so Lambda retries the batch from that
record (and gives up after its retries: the sweep covers it within a minute or two).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobstream import observability
from jobstream.lifecycle.log import body_shows_result
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.store.ports import NewCallback, new_items

logger = logging.getLogger(__name__)


@dataclass
class Handoffs:
    """What a batch of stream records names (store/stream_images.py), as the queues take it,
    each with its record's sequence number."""

    jobs: list[tuple[str, JobDispatch]] = field(default_factory=list)
    callbacks: list[tuple[str, NewCallback]] = field(default_factory=list)


def handoffs(records: Iterable[Mapping[str, Any]]) -> Handoffs:
    named = new_items(records)
    jobs = [(number, JobDispatch(job.job_id, job.tenant)) for number, job in named.jobs]
    return Handoffs(jobs, named.callbacks)


def _send_callbacks(rt: Runtime) -> Callable[[list[NewCallback]], int]:
    def send(callbacks: list[NewCallback]) -> int:
        # Each in its tenant's message group (a fair queue); a message whose event shows no
        # result says so, and its attempt reads two items, not three.
        refs = [callback.ref for callback in callbacks]
        without_result = [
            callback.kind is not None and not body_shows_result(callback.kind)
            for callback in callbacks
        ]
        return rt.callback_queue.send(
            refs, [callback.tenant for callback in callbacks], without_result
        )

    return send


def dispatch_records(rt: Runtime, records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Send what `records` name to their queues; the sequence numbers of the records whose
    send failed (Lambda retries the batch from the first of them)."""
    found = handoffs(records)
    failed: list[str] = []
    work, callback = rt.work_queue, rt.callback_queue
    # A queue without a URL (a deployment or test without it) takes nothing: nothing to retry.
    if found.jobs and getattr(work, "url", True):
        failed += _sent(
            found.jobs, work.send, "job dispatch failed; Lambda retries it, then the sweep"
        )
    if found.callbacks and getattr(callback, "url", True):
        failed += _sent(
            found.callbacks,
            _send_callbacks(rt),
            "callback hand-off failed; Lambda retries it, then the sweep",
        )
    observability.count("handed_off", len(found.jobs) + len(found.callbacks) - len(failed))
    if failed:
        observability.count("handoffs_failed", len(failed))
    return sorted(failed, key=_order)[:1]


def _sent(
    named: list[tuple[str, Any]], send: Callable[[list[Any]], int], warning: str
) -> list[str]:
    """[] when every message was accepted, else the sequence numbers of them all (which of a
    batch SQS refused is not worth telling apart: a duplicate is harmless)."""
    try:
        accepted = send([item for _, item in named])
    except Exception:
        logger.warning(warning, exc_info=True)
        return [number for number, _ in named]
    if accepted < len(named):
        logger.warning(warning)
        return [number for number, _ in named]
    return []


def _order(sequence_number: str) -> tuple[int, str]:
    # Stream sequence numbers are decimal strings of growing value.
    return (len(sequence_number), sequence_number)
