"""The event log: a job's moves committed with their events, the events its state implies
recorded on read (reconcile), and the one retry of a move that lost a race.

Every move goes through `commit`: the state change (lifecycle/transitions.py) and the event it
records, with its callback when the job has a callback URL: the job's conditional write decides
it, the event's put follows, and whoever finds that event missing writes it from the job
(store/pending.py); a terminal commit too: its job stays among the sweep's open jobs until its
stream is complete (store/jobs.py `append_event`).
A move that loses a race (StaleJobError) is decided again on the job as it is now
(`apply_until_settled`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from jobstream import observability
from jobstream.domain import TERMINAL_STATUSES, CallbackRecord, JobRecord, StoredEvent
from jobstream.lifecycle.retention import item_expiry, job_expiry
from jobstream.lifecycle.transitions import TERMINAL_KIND_BY_STATUS, Transition
from jobstream.protocol import documents
from jobstream.protocol.events import (
    ONCE_PER_JOB_KINDS,
    TERMINAL_KINDS,
    EventKind,
    protocol_type,
)
from jobstream.runtime import Runtime
from jobstream.store.ports import Append, CallbackIntent, StaleJobError, StateChange

__all__ = [
    "Settled",
    "after_append",
    "apply_until_settled",
    "callback_body",
    "callback_intent",
    "commit",
    "feed_stamp",
    "implied_events",
    "next_event",
    "reconcile",
    "settle_last_event",
]

# Each loss of a race re-reads the job; a job has at most a handful of lifecycle events.
MAX_RECORD_ATTEMPTS: Final = 8

# What a move decides on the job as it is read: its transition, or None when none is due.
Decide = Callable[[JobRecord], Transition | None]
# The job read again after a lost race (None: stop, the job is gone or the caller gives up).
Reread = Callable[[str, StaleJobError], JobRecord | None]


def implied_events(record: JobRecord) -> list[tuple[EventKind, int]]:
    """The lifecycle events the job's state implies, in stream order, with their times."""
    implied = [(EventKind.REQUESTED, record.created_at)]
    if record.started_at is not None:
        implied.append((EventKind.EXECUTION_STARTED, record.started_at))
    terminal = TERMINAL_KIND_BY_STATUS.get(record.status)
    if terminal is not None:
        implied.append((terminal, record.updated_at))
    return implied


def next_event(record: JobRecord, kind: EventKind, at: int) -> StoredEvent:
    """The job's next event; `at` never goes below an earlier event's, so order = time order.
    A progress event keeps the progress `record` (the job as the event leaves it) reports."""
    progressed = kind is EventKind.PROGRESSED
    return StoredEvent(
        job_id=record.job_id,
        sequence=record.event_count + 1,
        kind=kind.value,
        at=max(at, record.last_event_at),
        progress_stage=record.progress_stage if progressed else None,
        progress_message=record.progress_message if progressed else None,
    )


def callback_intent(
    record: JobRecord, event: StoredEvent, base_url: str | None
) -> CallbackIntent | None:
    """The callback to send for `event`, when the job declared a callback URL."""
    if not record.callback_url or protocol_type(event.kind) is None:
        return None
    watched = event.kind in TERMINAL_KINDS or record.status in TERMINAL_STATUSES
    return CallbackIntent(base_url=base_url, watched=watched)


def body_shows_result(kind: str) -> bool:
    """Whether a callback of this kind shows the job with its result (callback_body): a
    terminal event alone, so an attempt for any other need not read the result item."""
    return kind in TERMINAL_KINDS


def callback_body(
    record: JobRecord, intent: CallbackRecord, now: int, *, words: documents.JobTypeWords
) -> str | None:
    """The event an intent names, as its page shows it, rebuilt from the job read at send time
    (None for a kind that is never shown). The same document as at recording: an event shows
    the job's labels and correlation id, which never change, only a terminal event shows the
    job, which a terminal event leaves immutable, and a progress event its own progress, kept
    on its item with the callback. `words`: the job types' own (the job-type registry)."""
    event = StoredEvent(
        record.job_id,
        intent.sequence,
        intent.kind,
        intent.created_at,
        progress_stage=intent.progress_stage,
        progress_message=intent.progress_message,
    )
    document = documents.event_document(record, event, now, intent.base_url, words=words)
    if document is None:
        return None
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def feed_stamp(event: StoredEvent, now: int) -> int | None:
    """Where the event stands in its tenant's feed: when it commits (`now`, read just before
    the write), never before its own `at`; None for a kind the protocol never shows. An event
    the job's state implied is recorded late with an earlier `at`: it enters the feed when it
    commits, so a reader past its `at` still sees it (service/feed.py reads behind a horizon)."""
    return max(event.at, now) if protocol_type(event.kind) is not None else None


def after_append(record: JobRecord, event: StoredEvent) -> JobRecord:
    """The job as the store holds it once `event` has been appended (by this process: no
    event of it is left to make sure of)."""
    return replace(
        record,
        event_count=event.sequence,
        last_event_at=event.at,
        recorded_kinds=record.recorded_kinds | {event.kind},
        pending_event=None,
    )


def settle_last_event(rt: Runtime, record: JobRecord) -> bool:
    """Make sure the job's last event is written: a commit writes its job, then its event, and
    a writer that died between the two left it described on the job (store/pending.py). True
    when this call wrote it."""
    written = rt.store.settle_event(record, clock=rt.clock)
    if written:
        observability.count("events_settled")
    return written


def reconcile(rt: Runtime, record: JobRecord, base_url: str | None = None) -> JobRecord:
    """Record what the job's state implies and its stream lacks (the repair path).

    Safe under concurrency: the loser of a race re-reads and finds the event recorded. Not a
    move (no state change, one event after another until none is missing): its own loop.
    """
    for _ in range(MAX_RECORD_ATTEMPTS):
        missing = [
            (kind, at) for kind, at in implied_events(record) if kind not in record.recorded_kinds
        ]
        if not missing:
            return record
        kind, at = missing[0]
        event = next_event(record, kind, at)
        try:
            _append(rt, record, event, base_url=base_url)
            observability.count("events_repaired")
            record = after_append(record, event)
        except StaleJobError:
            fresh = rt.store.get_job(record.job_id)
            if fresh is None:
                return record
            record = fresh
    return record


def commit(
    rt: Runtime, record: JobRecord, transition: Transition, *, base_url: str | None = None
) -> JobRecord:
    """Apply a transition's state change and record its event (the job's write decides it, the
    event's put follows); the job as it is then, computed from the same change as the update.

    Raises StaleJobError when the job moved on; `apply_until_settled` decides again.
    """
    updated = transition.change.update.applied_to(record)
    event = next_event(updated, transition.kind, updated.updated_at)
    _append(rt, record, event, change=transition.change, base_url=base_url)
    return after_append(updated, event)


def give_up(_job_id: str, _stale: StaleJobError) -> None:
    """No second look after a lost race: the job moved on, and whoever moved it decided."""


@dataclass(frozen=True, slots=True)
class Settled:
    """How a move ended: the job as last known (as the move left it when `moved`), and the
    last race it lost with the transition that lost it, if any."""

    record: JobRecord
    moved: bool
    stale: StaleJobError | None = None
    tried: Transition | None = None


def apply_until_settled(
    rt: Runtime,
    record: JobRecord,
    decide: Decide,
    *,
    reread: Reread = give_up,
    attempts: int = 1,
    base_url: str | None = None,
) -> Settled:
    """Commit the transition `decide` finds due on the job; after a lost race, re-read it
    (`reread`) and decide again, at most `attempts` times. Settled once `decide` finds no move
    due, the move is committed, the re-read finds nothing, or the attempts are spent (the
    job as last read). `record` is the job as the caller read it: no read of its own first."""
    stale: StaleJobError | None = None
    tried: Transition | None = None
    for _ in range(attempts):
        transition = decide(record)
        if transition is None:
            break
        tried = transition
        try:
            return Settled(commit(rt, record, transition, base_url=base_url), moved=True)
        except StaleJobError as lost:
            stale = lost
            fresh = reread(record.job_id, lost)
            if fresh is None:
                break
            record = fresh
    return Settled(record, moved=False, stale=stale, tried=tried)


def _append(
    rt: Runtime,
    record: JobRecord,
    event: StoredEvent,
    *,
    change: StateChange | None = None,
    base_url: str | None,
) -> None:
    """Append `event` (with its callback, if any): the job's update, then the event. The
    callback names the event; its body is built from the job when it is sent. The dispatcher
    hands it to the callback queue from the table's stream (service/dispatcher.py): no write
    path waits for SQS."""
    if record.pending_event is not None:
        # The append replaces (or, terminal, drops) the description of the job's last event
        # (store/pending.py): that event is written first, whoever was to write it.
        settle_last_event(rt, record)
    intent = callback_intent(record, event, base_url)
    terminal = event.kind in TERMINAL_KINDS
    # Every item of the job expires from its deadline on; the terminal event starts the job
    # item's own retention period (lifecycle/retention.py), and frees the open job its
    # admission counted against its tenant's quotas (store/quotas.py).
    rt.store.append_event(
        record,
        Append(
            event,
            expires_at=item_expiry(record, rt.settings),
            intent=intent,
            feed_at=feed_stamp(event, rt.clock()),
            change=change,
            job_expires_at=job_expiry(record, event.at, rt.settings) if terminal else None,
            once_per_job=event.kind in ONCE_PER_JOB_KINDS,
            releases_quota_of=record.tenant if terminal and record.quota_counted else None,
        ),
        clock=rt.clock,
    )
    observability.count("events_recorded", dimension=event.kind)
