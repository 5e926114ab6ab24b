"""Retention: a finished job and every item of it expire together (DynamoDB TTL, `expires_at`).

The terminal event's transaction stamps the job, the terminal event and (as `retain_until`) its
callback intent, and puts the terminal event in the RETIRING backlog. The earlier items are
stamped right after, by `retire`, outside that transaction: a job may hold ~50 progress events
and as many intents, more than one transaction should carry (100 items, 4 MB, twice the write
units). `retire` is idempotent; when it does not finish (a crash, an error), the sweep runs it
again from the RETIRING backlog. A callback intent still open keeps no expiry: it learns its
job's (`retain_until`) and takes it when it is delivered or dead, so it never vanishes before.

An expired job is gone for admission: its key admits a new job (what TTL has not deleted yet is
deleted first), so the retention period is also the idempotency window.
"""

from __future__ import annotations

import logging
from typing import Final

from jobstream.config.settings import Settings
from jobstream.domain import CALLBACK_CLOSED_STATES, JobRecord
from jobstream.service.runtime import Runtime

logger = logging.getLogger("jobstream.retention")

SECONDS_PER_DAY: Final = 86_400


def expiry_of(finished_at_ms: int, settings: Settings) -> int:
    """`expires_at` (epoch seconds, as DynamoDB TTL needs) of a job that finished then."""
    return -(-finished_at_ms // 1000) + settings.retention_days * SECONDS_PER_DAY


def has_expired(record: JobRecord, now_ms: int) -> bool:
    return record.expires_at is not None and record.expires_at <= now_ms // 1000


def retire(rt: Runtime, job_id: str, terminal_sequence: int, expires_at: int) -> None:
    """Stamp the finished job's earlier events and intents with its expiry, then take it off
    the RETIRING backlog. Every step is idempotent; safe to run again at any point."""
    for sequence in rt.store.unstamped_events(job_id, terminal_sequence):
        rt.store.stamp_event(job_id, sequence, expires_at)
    for ref, state in rt.callbacks.unstamped(job_id, terminal_sequence):
        rt.callbacks.retain(ref, expires_at=expires_at, closed=state in CALLBACK_CLOSED_STATES)
    rt.store.finish_retiring(job_id, terminal_sequence)


def retire_after_commit(rt: Runtime, job_id: str, terminal_sequence: int, expires_at: int) -> None:
    """`retire` right after the terminal event's commit; a failure loses nothing (the job stays
    in the RETIRING backlog and the sweep finishes it), so it is logged, never raised."""
    try:
        retire(rt, job_id, terminal_sequence, expires_at)
    except Exception:
        logger.warning("retention step failed; the sweep will finish it", exc_info=True)


def retire_from_backlog(rt: Runtime, job_id: str, terminal_sequence: int) -> bool:
    """The sweep's repair: finish `retire` for a job of the RETIRING backlog. False when the
    entry was stale (its job expired or was admitted anew): it is only removed."""
    record = rt.store.get_job(job_id)
    if (
        record is None
        or record.expires_at is None
        or record.event_count != terminal_sequence
        or not record.is_terminal
    ):
        rt.store.finish_retiring(job_id, terminal_sequence)
        return False
    retire(rt, job_id, terminal_sequence, record.expires_at)
    return True
