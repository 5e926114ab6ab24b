"""The tenant's event feed (an extension of v1): every event of the caller's jobs in the order
they committed, resumable from any cursor it returned, long-polled, with named cursors.

Exactly once from any cursor: a page shows only events that committed at least
`feed_settle_ms` ago (the horizon). An event's place is when it committed, so every event that
will ever stand before the horizon has committed, and is in the index, by the time a reader
passes it: a cursor is never moved past an event it did not show. (The index is updated
asynchronously, typically within tens of milliseconds; the horizon is its margin and that of a
write in flight: each attempt of a write, a retry's too, carries a stamp taken just before it,
so the horizon covers one attempt, not the retries' budget: docs/protocol.md, "The tenant's
feed".)
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobstream import deadline, observability
from jobstream.domain import JobRecord
from jobstream.jobtypes import registry
from jobstream.lifecycle.retention import has_expired
from jobstream.protocol import feed as feed_documents
from jobstream.protocol.documents import event_document
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.pages import MAX_PAGE_BYTES, response_bytes
from jobstream.protocol.queries import Query, parse_feed_ack_body, parse_feed_query
from jobstream.runtime import Runtime
from jobstream.store.ports import FeedEntry

# Time kept after the last read of a long-poll to answer (rendering, the response).
_ANSWER_MS = 300


@dataclass(frozen=True, slots=True)
class _Shown:
    documents: list[dict[str, Any]]
    # The place after the last entry looked at (shown or not), START when none was.
    position: str
    has_more: bool


def feed_page(rt: Runtime, tenant: str, query: Query, base_url: str | None) -> dict[str, Any]:
    """A page of the tenant's feed after `after` (or after the named cursor `consumer`, or from
    the start); with `wait_ms`, an empty page waits up to that long for an event."""
    parsed = parse_feed_query(query)
    feed = rt.store.feed()
    if parsed.consumer is not None:
        position = feed.named_position(tenant, parsed.consumer) or feed_documents.START
    elif parsed.after is not None:
        position = _position(rt, tenant, parsed.after, "after")
    else:
        position = feed_documents.START
    waiting = _wait_deadline(parsed.wait_ms)
    waited = False
    while True:
        shown = _read(rt, tenant, position, parsed.limit, base_url)
        if shown.documents or shown.has_more or waiting is None or waiting.expired():
            break
        # Nothing to show yet: skip what was looked at (events of jobs that are gone).
        position = shown.position
        if not waited:
            observability.count("feed_waits")
            waited = True
        time.sleep(min(rt.settings.feed_poll_ms / 1000, waiting.remaining_s()))
    return feed_documents.feed_page(
        shown.documents,
        next_after=feed_documents.encode_cursor(tenant, shown.position),
        has_more=shown.has_more,
        now=rt.clock(),
        consumer=parsed.consumer,
    )


def acknowledge(rt: Runtime, tenant: str, body: Any) -> dict[str, Any]:
    """Move the named cursor `consumer` forward to `through` (never back)."""
    consumer, through = parse_feed_ack_body(body)
    position = _position(rt, tenant, through, "through")
    if position == feed_documents.START:
        held = rt.store.feed().named_position(tenant, consumer) or feed_documents.START
    else:
        held = rt.store.feed().move_named(tenant, consumer, position, now=rt.clock())
    return feed_documents.feed_ack_result(
        consumer, feed_documents.encode_cursor(tenant, held), rt.clock()
    )


def _position(rt: Runtime, tenant: str, cursor: str, field: str) -> str:
    position = feed_documents.decode_cursor(tenant, cursor, field)
    if position != feed_documents.START and not rt.store.is_feed_position(position):
        # A cursor we issued always names a place we wrote: this one was made elsewhere.
        raise invalid_params(
            f"{field} must be a cursor this API returned for this consumer's feed",
            detail={"field": field},
        )
    return position


def _wait_deadline(wait_ms: int) -> deadline.Deadline | None:
    """Until when an empty page may wait: `wait_ms`, and never past the invocation's end."""
    if wait_ms == 0:
        return None
    own = deadline.Deadline.after_ms(wait_ms)
    ending = deadline.invocation_deadline()
    if ending is not None:
        own = min(own, ending.less_ms(_ANSWER_MS), key=lambda point: point.at)
    return own


def _read(rt: Runtime, tenant: str, position: str, limit: int, base_url: str | None) -> _Shown:
    now = rt.clock()
    after = position if position != feed_documents.START else None
    page = rt.store.feed().entries_after(
        tenant, after, horizon=now - rt.settings.feed_settle_ms, limit=limit
    )
    jobs = rt.store.get_jobs(sorted({entry.event.job_id for entry in page.entries}))
    documents: list[dict[str, Any]] = []
    used = 0
    for entry in page.entries:
        document = _document(entry, jobs, now, base_url)
        if document is not None:
            size = response_bytes(document) + 1  # and its comma
            if documents and used + size > MAX_PAGE_BYTES:
                # Full by bytes: the next page starts with this entry.
                return _Shown(documents, position, has_more=True)
            documents.append(document)
            used += size
        position = entry.position
    return _Shown(documents, position, has_more=page.more)


def _document(
    entry: FeedEntry, jobs: Mapping[str, JobRecord], now: int, base_url: str | None
) -> dict[str, Any] | None:
    """The entry's event as its job's page shows it; None when its job is gone (past its
    retention, or replaced under its key by a newer job, whose events start after it)."""
    record = jobs.get(entry.event.job_id)
    if record is None or has_expired(record, now) or entry.event.at < record.created_at:
        return None
    return event_document(record, entry.event, now, base_url, words=registry)
