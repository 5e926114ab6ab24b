"""Retention: a finished job and every item of it expire (DynamoDB TTL, `expires_at`, epoch
seconds), none before its job, and nothing open expires.

Every item but the job item takes its expiry when it is written, from its job's deadline:
`deadline_at + ITEM_MARGIN + retention`. A job cannot stay open past its deadline (the sweep
expires it then, within a minute; `SWEEP_SLACK_MS` allows for a sweep that falls a day behind),
so no item expires before its job. A callback on an event is open for at most its retries
(`callback_span_ms`: 8 attempts, each waiting at most the retry cap, plus its lease and the
sweep's grace); the margin holds that too, so an open callback never expires. A redrive opens a
dead callback again: it loses its expiry until it closes (store/callbacks.py: revive).

The job item takes its own expiry with its terminal event: `finish + retention`, or its items'
if that comes first (a job that finished late). After it, reads no longer find the job and its
key admits a new job (service/admission.py); the items left of the old job are never read as
the new job's, and are overwritten or expire on their own.
"""

from __future__ import annotations

from typing import Final

from jobstream.config.settings import Settings
from jobstream.domain import JobRecord
from jobstream.store.ports import HANDOFF_GRACE_MS, MAX_CALLBACK_ATTEMPTS

SECONDS_PER_DAY: Final = 86_400
# How far behind the deadline verdicts the sweep may fall without an item expiring early.
SWEEP_SLACK_MS: Final = SECONDS_PER_DAY * 1000
# One attempt's lease beyond its request timeout (service/callbacks.py: LEASE_MARGIN_MS) and
# the sweep's look after it (HANDOFF_GRACE_MS, plus a sweep period).
_ATTEMPT_OVERHEAD_MS: Final = 30_000 + 2 * HANDOFF_GRACE_MS


def _seconds(ms: int) -> int:
    return -(-ms // 1000)


def callback_span_ms(settings: Settings) -> int:
    """The longest a callback stays open: every attempt's wait, request and lease."""
    return MAX_CALLBACK_ATTEMPTS * (
        settings.callback_retry_max_ms + settings.callback_timeout_ms + _ATTEMPT_OVERHEAD_MS
    )


def item_expiry(record: JobRecord, settings: Settings) -> int:
    """`expires_at` of every item of the job but the job item, set when the item is written."""
    deadline = record.deadline_at
    if deadline is None:
        deadline = record.created_at + settings.default_deadline_ms
    margin = SWEEP_SLACK_MS + callback_span_ms(settings)
    return _seconds(deadline + margin) + settings.retention_days * SECONDS_PER_DAY


def expiry_of(finished_at_ms: int, settings: Settings) -> int:
    """`expires_at` of a job that finished then: its retention period from its finish."""
    return _seconds(finished_at_ms) + settings.retention_days * SECONDS_PER_DAY


def job_expiry(record: JobRecord, finished_at_ms: int, settings: Settings) -> int:
    """`expires_at` of the job item, set with its terminal event: never after its items'."""
    return min(expiry_of(finished_at_ms, settings), item_expiry(record, settings))


def has_expired(record: JobRecord, now_ms: int) -> bool:
    return record.expires_at is not None and record.expires_at <= now_ms // 1000
