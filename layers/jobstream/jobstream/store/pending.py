"""A commit's event, described on its job item until the next commit (I10).

A commit is two single conditional writes, not one transaction (which bills every item twice):
the job's write, which decides it (its sequence condition serialises appenders: exactly one wins
each position), then its event's put. The job's write keeps a short description of the event in
`pending_event`, so that whoever finds the event missing, because its writer died between the
two writes, writes it from there (`event_of`):

- the next appender of the job, before its own write replaces the description
  (lifecycle/log.py `settle_last_event`): the events before a job's last one always exist, and
  every open job gets a next commit (its run's, a cancel, or the sweep's verdict);
- the sweep, for a job among its open jobs (JOB#ACTIVE) whose description is older than the
  hand-off grace: an ended job stays there until its terminal event is written and needs its
  cover no more (store/jobs.py `leave_active`, which drops the description);
- a page that finds the job ahead of its events (service/events.py).

Otherwise the description stays on the job item, describing the job's last event, until the next
commit replaces it. (The release before wrote a terminal commit as one transaction of both.)

Only what the job item does not hold already: the event's sequence is the job's `event_count`
and its `at` the job's `last_event_at`, both set by the same write. Short names: the
description rides on every later write of the job item, and write units are billed per KB.
"""

from __future__ import annotations

from typing import Any, Final

from jobstream.domain import JobRecord, StoredEvent
from jobstream.store import keys
from jobstream.store.ports import CallbackIntent, NewEvent

ATTRIBUTE: Final = keys.PENDING_EVENT

_KIND: Final = "k"
_EXPIRES: Final = "x"
# Marks, one letter each: "f" in the tenant's feed; a callback "w" watched from its recording
# (CALLBACK#HANDOFF) or "u" found through its job.
_MARKS: Final = "m"
_BASE_URL: Final = "b"
_STAGE: Final = "s"
_MESSAGE: Final = "t"


def describe(new: NewEvent) -> dict[str, Any]:
    """What the job item keeps of `new` until it is written."""
    event, intent = new.event, new.intent
    description: dict[str, Any] = {_KIND: event.kind, _EXPIRES: new.expires_at}
    marks = "f" if new.feed_at is not None else ""
    if intent is not None:
        marks += "w" if intent.watched else "u"
        if intent.base_url:
            description[_BASE_URL] = intent.base_url
    if marks:
        description[_MARKS] = marks
    if event.progress_stage is not None:
        description[_STAGE] = event.progress_stage
    if event.progress_message is not None:
        description[_MESSAGE] = event.progress_message
    return description


def event_of(record: JobRecord, *, now: int) -> NewEvent | None:
    """The job's last event as its commit described it, to write late (None when the job holds
    no description). Written late, its callback is watched (its own sweep entry: the job may
    have ended, and its terminal callback's hand-over passed, meanwhile), and it enters the
    tenant's feed when it is written (`now`), never behind a reader who passed its `at`."""
    description = record.pending_event
    if not description or record.event_count < 1:
        return None
    marks = str(description.get(_MARKS, ""))
    event = StoredEvent(
        job_id=record.job_id,
        sequence=record.event_count,
        kind=str(description[_KIND]),
        at=record.last_event_at,
        progress_stage=description.get(_STAGE),
        progress_message=description.get(_MESSAGE),
    )
    intent = (
        CallbackIntent(base_url=description.get(_BASE_URL), watched=True)
        if "w" in marks or "u" in marks
        else None
    )
    return NewEvent(
        event,
        expires_at=int(description[_EXPIRES]),
        intent=intent,
        feed_at=max(event.at, now) if "f" in marks else None,
    )
