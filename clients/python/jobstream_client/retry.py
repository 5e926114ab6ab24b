"""When to try a call again, and how long to wait first."""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` requests at most; between them `min(max_delay_s, base_delay_s·2^(n-1))` scaled
    by a random factor in [0.5, 1) (so many clients do not retry in step), unless the answer's
    `Retry-After` says how long — that is honoured, up to `max_delay_s`."""

    attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("delays must not be negative")

    def delay_s(
        self,
        failures: int,
        *,
        retry_after_s: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """The wait after the `failures`-th failed attempt (1-based)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_delay_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(failures - 1, 30))
        draw = (rng or _RANDOM).random()
        return ceiling * (0.5 + draw / 2)


NEVER = RetryPolicy(attempts=1)
_RANDOM = random.Random()  # noqa: S311 - jitter, not cryptography


def parse_retry_after(value: str | None, *, now_s: float) -> float | None:
    """Seconds from a `Retry-After` header: delta-seconds or an HTTP date; None if neither."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        return None
    return max(moment.timestamp() - now_s, 0.0)
