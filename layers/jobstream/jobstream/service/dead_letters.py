"""Operating dead letters: list the callbacks that ran out of budget, and redrive them."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobstream.domain import CallbackRecord, IntentRef, JobRecord
from jobstream.protocol.events import callback_event_id
from jobstream.service.retention import has_expired
from jobstream.service.runtime import Runtime

logger = logging.getLogger("jobstream.dead_letters")


def list_dead(rt: Runtime, *, limit: int = 1000) -> list[dict[str, Any]]:
    """Dead-lettered callbacks, oldest first: job, event, target, attempts, last error."""
    return [
        {
            "job_id": record.job_id,
            "event_id": callback_event_id(record),
            "callback_url": job.callback_url if job is not None else None,
            "attempts": record.attempts,
            "last_status": record.last_status,
            "last_error": record.last_error,
            "dead_at": record.dead_at,
        }
        for record, job in _dead_with_jobs(rt, limit)
    ]


def _dead_with_jobs(rt: Runtime, limit: int) -> list[tuple[CallbackRecord, JobRecord | None]]:
    """Dead callbacks with their jobs (the target is the job's: a callback names its event
    only); None for a job that is gone, or whose key now names a newer job."""
    dead = list(itertools.islice(rt.callbacks.dead(), limit))
    jobs = {job_id: rt.store.get_job_item(job_id) for job_id in {r.job_id for r in dead}}
    found = []
    for record in dead:
        job = jobs[record.job_id]
        if job is not None and (has_expired(job, rt.clock()) or record.created_at < job.created_at):
            job = None
        found.append((record, job))
    return found


@dataclass(frozen=True, slots=True)
class RedriveReport:
    revived: int
    messages_moved: int
    how: str


def redrive(
    rt: Runtime,
    *,
    job_id: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> RedriveReport:
    """Give dead callbacks (all, or one job's) a fresh budget and send them again. The dead
    letters of a job past its retention stay dead: they go with their job.

    `on_progress(done, total)` is called after each one (for a progress bar).
    """
    now = rt.clock()
    dead = [
        (record, job)
        for record, job in _dead_with_jobs(rt, 1000)
        if job_id is None or record.job_id == job_id
    ]
    revived: list[IntentRef] = []
    for done, (record, job) in enumerate(dead, start=1):
        # None: no longer dead (delivered or revived meanwhile); not ours to count.
        if job is not None and rt.callbacks.revive(record, now=now) is not None:
            revived.append(record.ref)
        if on_progress is not None:
            on_progress(done, len(dead))
    queue = rt.callback_queue
    if job_id is None:
        # Everything in the dead-letter queue goes back to its source queue.
        moved, how = queue.redrive_dead_letters()
    else:
        # One job: send its revived callbacks; their old dead letters are settled on receipt.
        moved, how = queue.send(revived), "sent"
    return RedriveReport(revived=len(revived), messages_moved=moved, how=how)
