"""Classify one delivery attempt: delivered, worth retrying, or dead for good."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from jobstream.outbound.url import OutboundRefused

MAX_ERROR_CHARS: Final = 1000
_ELLIPSIS: Final = "…"
# Control characters become spaces so an error stays one readable line in records and logs.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]+")


class Outcome(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"
    DEAD = "dead"
    # 410 Gone: the receiver says the endpoint itself is gone (Standard Webhooks): it is
    # disabled for the tenant, and this callback waits for it to be enabled again.
    GONE = "gone"


@dataclass(frozen=True, slots=True)
class Verdict:
    """An attempt's outcome; `error` is "" when delivered and never over MAX_ERROR_CHARS."""

    outcome: Outcome
    status: int | None
    error: str

    def __post_init__(self) -> None:
        if len(self.error) > MAX_ERROR_CHARS:
            object.__setattr__(self, "error", _truncate(self.error))


def classify_status(status: int, body_excerpt: str = "") -> Verdict:
    """2xx and 409 (already have it) are delivered; 429 and 5xx retry; 410 is gone; the rest
    is dead.

    3xx is dead because redirects are not followed: a redirect could point anywhere.
    1xx as a final status is a broken receiver and is retried.
    """
    if 200 <= status < 300 or status == 409:
        return Verdict(Outcome.DELIVERED, status, "")
    excerpt = _CONTROL.sub(" ", body_excerpt).strip()
    label = f"HTTP {status}"
    if 300 <= status < 400:
        label += " (redirects are not followed)"
    error = f"{label}: {excerpt}" if excerpt else label
    if status == 429 or status >= 500 or status < 200:
        return Verdict(Outcome.RETRY, status, error)
    if status == 410:
        return Verdict(Outcome.GONE, status, error)
    return Verdict(Outcome.DEAD, status, error)


def classify_exception(error: BaseException) -> Verdict:
    """A refused URL is dead; anything else retries (an answer, whatever its status, is no
    exception: delivery/http.py returns it and classify_status judges it). A name DNS says does
    not exist is a refusal; a resolver that failed or stalled (outbound/guard.py:
    DnsUnavailableError, an OSError) retries like a network error."""
    if isinstance(error, OutboundRefused):
        return Verdict(Outcome.DEAD, None, f"refused: {error.reason}: {error.message}")
    # Timeouts, refused or reset connections, TLS failures (ssl.SSLError is an OSError) and
    # malformed responses (http.client.HTTPException) are transient as far as we can tell;
    # unknown errors retry too, and run out of attempts if they persist.
    return Verdict(Outcome.RETRY, None, _describe(error))


def _describe(error: BaseException) -> str:
    message = _CONTROL.sub(" ", str(error)).strip()
    name = type(error).__name__
    return f"{name}: {message}" if message else name


def _truncate(text: str) -> str:
    return text[: MAX_ERROR_CHARS - len(_ELLIPSIS)] + _ELLIPSIS
