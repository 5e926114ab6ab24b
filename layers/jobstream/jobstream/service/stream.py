"""The event stream: recording lifecycle events, reconcile on read, pages and acks."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Final

from jobstream import observability
from jobstream.domain import CallbackRecord, JobRecord, StoredEvent
from jobstream.protocol import documents
from jobstream.protocol.events import (
    ONCE_PER_JOB_KINDS,
    TERMINAL_KIND_BY_STATUS,
    TERMINAL_KINDS,
    EventKind,
    parse_event_position,
    protocol_type,
)
from jobstream.protocol.queries import Query, parse_ack_body, parse_events_query
from jobstream.service.ownership import load_owned_job, load_owned_job_and_event_at
from jobstream.service.retention import item_expiry, job_expiry
from jobstream.service.runtime import Runtime
from jobstream.store.jobs import Append, CallbackIntent, StaleJobError, StateChange

# Each loss of a race re-reads the job; a job has at most a handful of lifecycle events.
MAX_RECORD_ATTEMPTS: Final = 8


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
    return CallbackIntent(base_url=base_url)


def callback_body(record: JobRecord, intent: CallbackRecord, now: int) -> str | None:
    """The event an intent names, as its page shows it, rebuilt from the job read at send time
    (None for a kind that is never shown). The same document as at recording: an event shows
    the job's labels and correlation id, which never change, only a terminal event shows the
    job, which a terminal event leaves immutable, and a progress event its own progress, kept
    on its item with the callback."""
    event = StoredEvent(
        record.job_id,
        intent.sequence,
        intent.kind,
        intent.created_at,
        progress_stage=intent.progress_stage,
        progress_message=intent.progress_message,
    )
    document = documents.event_document(record, event, now, intent.base_url)
    if document is None:
        return None
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def after_append(record: JobRecord, event: StoredEvent) -> JobRecord:
    """The job as the store holds it once `event` has been appended."""
    return replace(
        record,
        event_count=event.sequence,
        last_event_at=event.at,
        recorded_kinds=record.recorded_kinds | {event.kind},
    )


def reconcile(rt: Runtime, record: JobRecord, base_url: str | None = None) -> JobRecord:
    """Record what the job's state implies and its stream lacks (the repair path).

    Safe under concurrency: the loser of a race re-reads and finds the event recorded.
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
            _commit(rt, record, event, base_url=base_url)
            observability.count("events_repaired")
            record = after_append(record, event)
        except StaleJobError:
            fresh = rt.store.get_job(record.job_id)
            if fresh is None:
                return record
            record = fresh
    return record


def events_page(
    rt: Runtime, tenant: str, job_id: str, query: Query, base_url: str | None
) -> dict[str, Any]:
    after, unacked_only = parse_events_query(query)
    record = reconcile(rt, load_owned_job(rt, tenant, job_id), base_url)
    if unacked_only or after is None:
        start = record.ack_sequence if unacked_only else 0
        events, has_more = rt.store.events_after(
            record.job_id, start, documents.PAGE_SIZE, since=record.created_at
        )
    else:
        events, has_more = _events_after_id(rt, record, after)
    if events and events[-1].sequence > record.event_count:
        # A writer appended after the job was read. An event commits in one transaction with
        # its job's update, so the job read now is at least as new as every event on the page:
        # a terminal event always shows its terminal job.
        record = rt.store.get_job(record.job_id) or record
        # That read may know events appended after the query: the page says more follow.
        has_more = has_more or record.event_count > events[-1].sequence
    return documents.event_page(
        record, events, has_more=has_more, now=rt.clock(), base_url=base_url
    )


def _events_after_id(rt: Runtime, record: JobRecord, after: str) -> tuple[list[StoredEvent], bool]:
    """The page after the event `after` names; from the start when it names no event of this
    job (unknown, malformed or foreign ids replay everything: consumers dedupe)."""
    position = parse_event_position(after, record.job_id)
    if position is not None and position[1] <= record.event_count:
        at, sequence = position
        # Read the named event too, in the same query: the id must name its `at` exactly.
        events, has_more = rt.store.events_after(
            record.job_id, sequence - 1, documents.PAGE_SIZE + 1, since=record.created_at
        )
        if events and (events[0].sequence, events[0].at) == (sequence, at):
            return events[1:], has_more
    return rt.store.events_after(record.job_id, 0, documents.PAGE_SIZE, since=record.created_at)


def acknowledge(
    rt: Runtime, tenant: str, job_id: str, body: Any, base_url: str | None
) -> dict[str, Any]:
    ack_through = parse_ack_body(body)
    position = parse_event_position(ack_through, job_id)
    owned, event_at = load_owned_job_and_event_at(
        rt, tenant, job_id, position[1] if position is not None else None
    )
    record = reconcile(rt, owned, base_url)
    # The id must name this job's event exactly (`at` too): another job's id, or an id of no
    # event, is a no-op.
    if position is not None and event_at == position[0] and record.ack_sequence < position[1]:
        if rt.store.advance_ack(record, position[1], expires_at=item_expiry(record, rt.settings)):
            record = replace(record, ack_sequence=position[1])
        else:
            # A concurrent ack went further first: report the durable state.
            record = rt.store.get_job(record.job_id) or record
    return documents.ack_result(record, rt.clock())


def record_transition(
    rt: Runtime,
    record: JobRecord,
    *,
    kind: EventKind,
    change: StateChange,
    base_url: str | None = None,
) -> JobRecord:
    """Apply a state change and record the event it implies in ONE transaction; the job as
    it is then, computed from the same change as the update.

    Raises StaleJobError when the job moved on; the caller re-reads and decides again.
    """
    updated = change.update.applied_to(record)
    event = next_event(updated, kind, updated.updated_at)
    _commit(rt, record, event, change=change, base_url=base_url)
    return after_append(updated, event)


def _commit(
    rt: Runtime,
    record: JobRecord,
    event: StoredEvent,
    *,
    change: StateChange | None = None,
    base_url: str | None,
) -> None:
    """Append `event` (with its callback, if any) atomically. The callback names the event; its
    body is built from the job when it is sent. The dispatcher hands it to the callback queue
    from the table's stream (service/dispatcher.py): no write path waits for SQS."""
    intent = callback_intent(record, event, base_url)
    # Every item of the job expires from its deadline on; the terminal event starts the job
    # item's own retention period (service/retention.py).
    rt.store.append_event(
        record,
        Append(
            event,
            expires_at=item_expiry(record, rt.settings),
            intent=intent,
            change=change,
            job_expires_at=(
                job_expiry(record, event.at, rt.settings) if event.kind in TERMINAL_KINDS else None
            ),
            once_per_job=event.kind in ONCE_PER_JOB_KINDS,
        ),
    )
    observability.count("events_recorded", dimension=event.kind)
