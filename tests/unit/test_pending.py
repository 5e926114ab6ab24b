"""The description of a commit's event on its job item (store/pending.py): what is kept, and
the event written late from it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobstream.domain import JobRecord, JobStatus, StoredEvent
from jobstream.store import pending
from jobstream.store.ports import CallbackIntent, NewEvent
from tests.support.records import job_record

AT = 1_790_000_000_000


def job(**changes: object) -> JobRecord:
    return job_record(
        **{
            "status": JobStatus.RUNNING,
            "created_at": AT - 5_000,
            "updated_at": AT,
            "event_count": 2,
            "last_event_at": AT,
            **changes,
        }
    )


def progressed(**changes: object) -> NewEvent:
    event = StoredEvent("job_x", 2, "job.progressed", AT, "fetching", "page 2 of 3")
    return NewEvent(event, expires_at=1_800_000_000, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("watched", [False, True])
def test_an_event_written_late_is_the_described_one_its_callback_watched(watched: bool) -> None:
    new = progressed(intent=CallbackIntent("https://api.example", watched=watched), feed_at=AT)
    record = job(pending_event=pending.describe(new))
    late = pending.event_of(record, now=AT + 60_000)
    assert late is not None
    assert late.event == new.event
    assert late.expires_at == new.expires_at
    # Late, it is watched by the sweep whatever it was, and enters the feed when written.
    assert late.intent == CallbackIntent("https://api.example", watched=True)
    assert late.feed_at == AT + 60_000


def test_an_event_without_callback_or_feed_stays_without() -> None:
    new = NewEvent(StoredEvent("job_x", 2, "job.internal", AT), expires_at=1_800_000_000)
    late = pending.event_of(job(pending_event=pending.describe(new)), now=AT)
    assert late is not None
    assert (late.intent, late.feed_at) == (None, None)
    assert late.event == new.event


def test_the_feed_never_places_it_before_its_own_at() -> None:
    new = progressed(feed_at=AT)
    late = pending.event_of(job(pending_event=pending.describe(new)), now=AT - 1_000)
    assert late is not None
    assert late.feed_at == AT


def test_the_description_keeps_only_what_the_job_item_lacks() -> None:
    new = progressed(intent=CallbackIntent(None, watched=False), feed_at=AT)
    assert pending.describe(new) == {
        "k": "job.progressed",
        "x": 1_800_000_000,
        "m": "fu",
        "s": "fetching",
        "t": "page 2 of 3",
    }


@pytest.mark.parametrize("record", [job(), job(pending_event={}), job(event_count=0)])
def test_nothing_to_write_without_a_description(record: JobRecord) -> None:
    if record.event_count == 0:
        record = replace(record, pending_event=pending.describe(progressed()))
    assert pending.event_of(record, now=AT) is None
