"""The largest jobs the size budgets allow (`store/budgets.py`), for tests at the limits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from jobstream.domain import JobRecord, StoredEvent
from jobstream.lifecycle.identity import derive_job_id
from jobstream.protocol.errors import Reason
from jobstream.protocol.events import EventKind
from jobstream.protocol.task import MAX_CALLBACK_URL, MAX_CORRELATION_ID, MAX_IDEMPOTENCY_KEY
from jobstream.store import pending
from jobstream.store.budgets import (
    ADMITTED_JOB_BYTES,
    MAX_MESSAGE_CHARS,
    MAX_PROGRESS_MESSAGE_BYTES,
    MAX_PROGRESS_STAGE_BYTES,
    RESULT_BYTES,
    admitted_job_size,
    result_size,
)
from jobstream.store.ports import CallbackIntent, NewEvent

AT = 1_790_481_174_000
# Three UTF-8 bytes and one UTF-16 unit: the most bytes a length-limited id can take.
WIDE = "西"


def fill(size_of: Callable[[str], int], target: int, filler: str) -> str:
    """The text of `filler`s (and ASCII to make up the rest) whose `size_of` is `target`.
    Sized from a long text: a short one may be stored otherwise (labels up to 1 KB go to the
    listing index, store/listed.py)."""
    sample = 2_000
    step = size_of(filler * (sample + 1)) - size_of(filler * sample)
    base = size_of(filler * sample) - sample * step
    count, rest = divmod(target - base, step)
    text = filler * count + "x" * rest
    assert size_of(text) == target, (size_of(text), target)
    return text


def admitted(labels: dict[str, str] | None = None, **overrides: Any) -> JobRecord:
    """A job as admission writes it, with its ids as long as admission allows."""
    key = WIDE * MAX_IDEMPOTENCY_KEY
    values: dict[str, Any] = {
        "job_id": derive_job_id("acme", key),
        "tenant": "acme",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"query": {"tags": ["西瓜肚"]}},
        "params_canonical": '{"query":{"tags":["西瓜肚"]}}',
        "target_id": "bot1-illust-botefuku",
        "status": "queued",
        "created_at": AT,
        "updated_at": AT,
        "deadline_at": AT + 1_200_000,
        "correlation_id": WIDE * MAX_CORRELATION_ID,
        "labels": labels,
        "callback_url": "https://consumer.example.test/" + WIDE * (MAX_CALLBACK_URL - 30),
        "event_count": 1,
        "last_event_at": AT,
        "recorded_kinds": frozenset({EventKind.REQUESTED.value}),
    }
    values.update(overrides)
    return JobRecord(**values)


def admitted_at_budget(filler: str = "x", bytes_: int = ADMITTED_JOB_BYTES) -> JobRecord:
    """An admitted job whose labels make it take exactly `bytes_` (the budget by default)."""
    text = fill(lambda value: admitted_job_size(admitted({"l": value})), bytes_, filler)
    return admitted({"l": text})


def result_of(size: int = RESULT_BYTES, filler: str = "x") -> dict[str, Any]:
    """A candidate_search result whose stored `result` attribute takes exactly `size` bytes."""

    def result(title: str) -> dict[str, Any]:
        return {
            "candidates": [
                {
                    "candidate_id": "pixiv:1",
                    "platform": "pixiv",
                    "work_id": "1",
                    "work_type": "illustration",
                    "url": "https://www.pixiv.net/artworks/1",
                    "metadata": {"title": title},
                }
            ],
            "scanned": 100,
            "filtered": [],
        }

    return result(fill(lambda title: result_size(result(title)), size, filler))


def fattest(record: JobRecord, *, result: dict[str, Any] | None = None) -> JobRecord:
    """`record` with every attribute written after admission at its largest at once: lease,
    timestamps, counters, kinds, messages (a kept failure's too) at their clipped length, a
    result at its budget."""
    later = AT + 10**9
    return replace(
        record,
        status="succeeded",
        started_at=later,
        heartbeat_at=later,
        lease_owner="message:" + "f" * 100,
        lease_expires_at=later,
        attempt=10**6,
        progress_stage="\U0001f600" * (MAX_PROGRESS_STAGE_BYTES // 4),
        progress_message="\U0001f600" * (MAX_PROGRESS_MESSAGE_BYTES // 4),
        progress_events=10**6,
        dispatched_at=later,
        reason=max((reason.value for reason in Reason), key=len),
        reason_message="\U0001f600" * MAX_MESSAGE_CHARS,
        pending_reason=max((reason.value for reason in Reason), key=len),
        pending_message="\U0001f600" * MAX_MESSAGE_CHARS,
        result=result if result is not None else result_of(),
        event_count=10**6,
        last_event_at=later,
        recorded_kinds=frozenset(kind.value for kind in EventKind if kind.value.startswith("job.")),
        ack_sequence=10**6,
        # The description of its last event (store/pending.py) at its largest: a progress
        # event's clipped stage and message, a watched callback on the longest base URL a
        # request can name (a DNS name of 253 characters and a stage name of 128).
        pending_event=pending.describe(
            NewEvent(
                StoredEvent(
                    record.job_id,
                    10**6,
                    max((kind.value for kind in EventKind), key=len),
                    later,
                    progress_stage="\U0001f600" * (MAX_PROGRESS_STAGE_BYTES // 4),
                    progress_message="\U0001f600" * (MAX_PROGRESS_MESSAGE_BYTES // 4),
                ),
                expires_at=10**10,
                intent=CallbackIntent(
                    base_url="https://" + "h" * 253 + "/" + "s" * 128, watched=True
                ),
                feed_at=later,
            )
        ),
    )
