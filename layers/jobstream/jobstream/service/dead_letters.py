"""Operating dead letters: list the callbacks that ran out of budget, and redrive them."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobstream.domain import IntentRef
from jobstream.protocol.events import parse_event_position
from jobstream.service.runtime import Runtime

logger = logging.getLogger("jobstream.dead_letters")


def list_dead(rt: Runtime, *, limit: int = 1000) -> list[dict[str, Any]]:
    """Dead-lettered callbacks, oldest first: job, event, target, attempts, last error."""
    return [
        {
            "job_id": record.job_id,
            "event_id": record.event_id,
            "callback_url": record.callback_url,
            "attempts": record.attempts,
            "last_status": record.last_status,
            "last_error": record.last_error,
            "dead_at": record.dead_at,
        }
        for record in itertools.islice(rt.callbacks.dead(), limit)
    ]


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
    """Give dead callbacks (all, or one job's) a fresh budget and send them again.

    `on_progress(done, total)` is called after each one (for a progress bar).
    """
    now = rt.clock()
    dead = [item for item in list_dead(rt) if job_id is None or item["job_id"] == job_id]
    revived: list[IntentRef] = []
    for done, item in enumerate(dead, start=1):
        position = parse_event_position(item["event_id"], item["job_id"])
        if position is not None:
            ref = IntentRef(item["job_id"], position[1])
            # None: no longer dead (delivered or revived meanwhile); not ours to count.
            if rt.callbacks.revive(ref, now=now) is not None:
                revived.append(ref)
        if on_progress is not None:
            on_progress(done, len(dead))
    queue = rt.callback_queue
    if job_id is None:
        # Everything in the dead-letter queue goes back to its source queue.
        moved, how = queue.redrive_dead_letters()
    else:
        # One job: send its revived intents; their old dead letters are settled on receipt.
        moved, how = queue.send(revived), "sent"
    return RedriveReport(revived=len(revived), messages_moved=moved, how=how)
