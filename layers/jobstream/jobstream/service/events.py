"""A job's event stream as its consumer reads it: pages of events and acks (the events are
recorded by the moves themselves, lifecycle/log.py; a read reconciles first)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from jobstream.domain import JobRecord, StoredEvent
from jobstream.jobtypes import registry
from jobstream.lifecycle.log import reconcile, settle_last_event
from jobstream.lifecycle.retention import item_expiry
from jobstream.protocol import documents
from jobstream.protocol.events import parse_event_position
from jobstream.protocol.queries import Query, parse_ack_body, parse_events_query
from jobstream.runtime import Runtime
from jobstream.service.ownership import load_owned_job, load_owned_job_and_event_at


def events_page(
    rt: Runtime, tenant: str, job_id: str, query: Query, base_url: str | None
) -> dict[str, Any]:
    after, unacked_only = parse_events_query(query)
    record = reconcile(rt, load_owned_job(rt, tenant, job_id), base_url)
    start, events, has_more = _page(rt, record, after, unacked_only=unacked_only)
    if not has_more and (events[-1].sequence if events else start) < record.event_count:
        # The job is ahead of its events: its last commit's event is being written, or its
        # writer died between its two writes (store/pending.py). Written now if missing (a
        # race with a live writer is harmless: one of the two puts wins, the same event).
        settle_last_event(rt, record)
        start, events, has_more = _page(rt, record, after, unacked_only=unacked_only)
    if events and events[-1].sequence > record.event_count:
        # A writer appended after the job was read. A commit writes its job before its event,
        # so the job read now is at least as new as every event on the page: a terminal event
        # always shows its terminal job.
        record = rt.store.get_job(record.job_id) or record
        # That read may know events appended after the query: the page says more follow.
        has_more = has_more or record.event_count > events[-1].sequence
    return documents.event_page(
        record, events, has_more=has_more, now=rt.clock(), base_url=base_url, words=registry
    )


def _page(
    rt: Runtime, record: JobRecord, after: str | None, *, unacked_only: bool
) -> tuple[int, list[StoredEvent], bool]:
    """The page's start (the sequence it reads after), its events, and whether more follow."""
    if unacked_only or after is None:
        start = record.ack_sequence if unacked_only else 0
        events, has_more = rt.store.events_after(
            record.job_id, start, documents.PAGE_SIZE, since=record.created_at
        )
        return start, events, has_more
    return _events_after_id(rt, record, after)


def _events_after_id(
    rt: Runtime, record: JobRecord, after: str
) -> tuple[int, list[StoredEvent], bool]:
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
            return sequence, events[1:], has_more
    events, has_more = rt.store.events_after(
        record.job_id, 0, documents.PAGE_SIZE, since=record.created_at
    )
    return 0, events, has_more


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
