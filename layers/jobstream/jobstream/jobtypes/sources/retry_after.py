"""The wait a source asks for when it refuses a request (HTTP 429, 503): its Retry-After."""

from __future__ import annotations

from typing import Final

from jobstream.backoff import parse_retry_after
from jobstream.clock import now_ms as wall_clock_ms

# Statuses whose Retry-After says when to ask again (RFC 9110 §10.2.3).
RETRY_AFTER_STATUSES: Final = frozenset({429, 503})
# A source asking for more than an hour is taken at an hour: the job's retries stay in reach.
MAX_RETRY_AFTER_MS: Final = 3600 * 1000


def retry_after_ms(
    status: int | None, header: str | None, *, now_ms: int | None = None
) -> int | None:
    """A 429's or 503's Retry-After (delta-seconds or an HTTP-date) in milliseconds, clamped to
    0..3600 s; None for another status, no header, or one that says nothing parseable."""
    if status not in RETRY_AFTER_STATUSES:
        return None
    now = wall_clock_ms() if now_ms is None else now_ms
    wait = parse_retry_after(header, now_ms=now)
    return None if wait is None else min(max(wait, 0), MAX_RETRY_AFTER_MS)
