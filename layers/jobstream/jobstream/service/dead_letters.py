"""Operating dead letters: list the callbacks that ran out of budget, and redrive them."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from jobstream.domain import CallbackRecord, IntentRef, JobRecord
from jobstream.lifecycle.retention import has_expired
from jobstream.protocol.events import callback_event_id
from jobstream.runtime import Runtime

logger = logging.getLogger(__name__)

# Dead callbacks read at a time (their jobs are read once a page).
PAGE: Final = 100


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
        for record, job in itertools.islice(_dead_with_jobs(rt), limit)
    ]


def _dead_with_jobs(rt: Runtime) -> Iterator[tuple[CallbackRecord, JobRecord | None]]:
    """Dead callbacks, oldest first, with their jobs (the target is the job's: a callback names
    its event only); None for a job that is gone, or whose key now names a newer job. Read
    lazily, a page at a time (each job read once a page), however many there are."""
    dead = rt.callbacks.dead()
    while page := list(itertools.islice(dead, PAGE)):
        now = rt.clock()
        jobs = {job_id: rt.store.get_job_item(job_id) for job_id in {r.job_id for r in page}}
        for record in page:
            job = jobs[record.job_id]
            if job is not None and (has_expired(job, now) or record.created_at < job.created_at):
                job = None
            yield record, job


@dataclass(frozen=True, slots=True)
class RedriveReport:
    revived: int
    messages_moved: int
    how: str


def redrive(
    rt: Runtime,
    *,
    job_id: str | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> RedriveReport:
    """Give dead callbacks (all, or one job's) a fresh budget and send them again: every one
    that was dead when the redrive started, however many. The dead letters of a job past its
    retention stay dead: they go with their job.

    `on_progress(looked_at)` is called after each dead callback looked at (for a progress bar).
    """
    started = rt.clock()
    revived: list[IntentRef] = []
    for looked_at, (record, job) in enumerate(_dead_with_jobs(rt), start=1):
        if (record.dead_at or 0) > started:
            # Died during this redrive (the index is in order of death): not this run's.
            break
        wanted = job is not None and (job_id is None or record.job_id == job_id)
        # None: no longer dead (delivered or revived meanwhile); not ours to count.
        if wanted and rt.callbacks.revive(record, now=started) is not None:
            revived.append(record.ref)
        if on_progress is not None:
            on_progress(looked_at)
    queue = rt.callback_queue
    if job_id is None:
        # Everything in the dead-letter queue goes back to its source queue.
        moved, how = queue.redrive_dead_letters()
    else:
        # One job: send its revived callbacks; their old dead letters are settled on receipt.
        moved, how = queue.send(revived), "sent"
    return RedriveReport(revived=len(revived), messages_moved=moved, how=how)
