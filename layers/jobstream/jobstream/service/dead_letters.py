"""Operating dead letters: list the callbacks that ran out of budget, and redrive them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from jobstream.service.runtime import Runtime
from jobstream.store.callbacks import IntentRef

logger = logging.getLogger("jobstream.dead_letters")
PAGE: Final = 100


def list_dead(rt: Runtime, *, limit: int = 1000) -> list[dict[str, Any]]:
    """Dead-lettered callbacks, oldest first: job, event, target, attempts, last error."""
    found: list[dict[str, Any]] = []
    start_key = None
    while len(found) < limit:
        records, start_key = rt.callbacks.dead(
            limit=min(PAGE, limit - len(found)), start_key=start_key
        )
        found += [
            {
                "job_id": record.job_id,
                "event_id": record.event_id,
                "callback_url": record.callback_url,
                "attempts": record.attempts,
                "last_status": record.last_status,
                "last_error": record.last_error,
                "dead_at": record.dead_at,
            }
            for record in records
        ]
        if start_key is None:
            break
    return found


@dataclass(frozen=True, slots=True)
class RedriveReport:
    revived: int
    messages_moved: int
    how: str


def redrive(rt: Runtime, *, job_id: str | None = None) -> RedriveReport:
    """Give dead callbacks (all, or one job's) a fresh budget and send them again."""
    now = rt.clock()
    revived: list[IntentRef] = []
    for dead in list_dead(rt):
        if job_id is not None and dead["job_id"] != job_id:
            continue
        sequence = int(dead["event_id"].rsplit("-", 1)[1])
        ref = IntentRef(dead["job_id"], sequence)
        if rt.callbacks.revive(ref, now=now) is not None:
            revived.append(ref)
    queue = rt.callback_queue
    if job_id is None:
        # Everything in the dead-letter queue goes back to its source queue.
        moved, how = queue.redrive_dead_letters()
    else:
        # One job: send its revived intents; their old dead letters are settled on receipt.
        moved, how = queue.send(revived), "sent"
    return RedriveReport(revived=len(revived), messages_moved=moved, how=how)
