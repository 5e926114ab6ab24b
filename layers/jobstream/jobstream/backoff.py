"""Retry timing: capped exponential backoff with jitter, and the receiver's Retry-After."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import UTC
from typing import Final

# 2**18 times any sensible base is past any sensible cap; the bound keeps the number small.
_MAX_DOUBLINGS: Final = 18
_DELTA_SECONDS: Final = re.compile(r"[0-9]+", re.ASCII)
# Longer delta-seconds are clamped here instead of converted (the caller caps far below it).
_MAX_DELTA_DIGITS: Final = 12


def retry_delay_ms(
    attempt: int,
    *,
    base_ms: int,
    max_ms: int,
    rand: Callable[[], float] = random.random,
    retry_after_ms: int | None = None,
) -> int:
    """The wait after failed attempt number `attempt` (1-based).

    Without Retry-After: a uniform draw in [cap/2, cap) where cap = min(max_ms,
    base_ms * 2**(attempt-1)) ("equal jitter": spreads retries, never retries too soon).
    With Retry-After: exactly what the receiver asked for, capped at max_ms.
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    if base_ms < 0 or max_ms < 0:
        raise ValueError("base_ms and max_ms must not be negative")
    if retry_after_ms is not None:
        return min(max_ms, max(retry_after_ms, 0))
    cap = min(max_ms, base_ms * (1 << min(attempt - 1, _MAX_DOUBLINGS)))
    if cap == 0:
        return 0
    jitter = 0.5 + 0.5 * rand()
    # Rounding (or a rand() of 1.0) could reach the cap itself; the interval stays half-open.
    return min(max(round(cap * jitter), 0), cap - 1)


def parse_retry_after(value: str | None, *, now_ms: int) -> int | None:
    """Retry-After as milliseconds from `now_ms`: delta-seconds or an HTTP-date.

    None when absent or invalid; a date in the past is 0.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if _DELTA_SECONDS.fullmatch(text):
        digits = text.lstrip("0") or "0"
        if len(digits) > _MAX_DELTA_DIGITS:
            return 10**_MAX_DELTA_DIGITS * 1000
        return int(digits) * 1000
    # Only a receiver that names a date needs the email package (a cold start need not).
    from email.utils import parsedate_to_datetime  # noqa: PLC0415

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        # An HTTP-date is always GMT; "-0000" parses as naive.
        when = when.replace(tzinfo=UTC)
    return max(0, round(when.timestamp() * 1000) - now_ms)
