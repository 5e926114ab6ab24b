"""A callback's POST over pinned HTTP (outbound/http.py): its status, an excerpt of its body
and its Retry-After, for the classification (classify.py)."""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from jobstream.deadline import Deadline
from jobstream.outbound.guard import PinnedTarget
from jobstream.outbound.http import exchange

BODY_EXCERPT_BYTES: Final = 512


@dataclass(frozen=True, slots=True)
class HttpResult:
    status: int
    body_excerpt: str
    retry_after: str | None


def _answer(response: http.client.HTTPResponse) -> HttpResult:
    excerpt = response.read(BODY_EXCERPT_BYTES).decode("utf-8", "replace")
    return HttpResult(response.status, excerpt, response.getheader("Retry-After"))


def post_callback(
    target: PinnedTarget, body: bytes, headers: Mapping[str, str], timeout_s: float
) -> HttpResult:
    """POST `body`, over within `timeout_s` (wall-clock). Raises on I/O errors."""
    deadline = Deadline.after_ms(timeout_s * 1000)
    return exchange(target, "POST", headers, deadline=deadline, read=_answer, body=body)
