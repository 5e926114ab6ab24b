"""Query and body parsing of the read routes, in the reference order and words. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from jobstream.domain import JobStatus
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.js import is_blank, js_length
from jobstream.protocol.task import MAX_CORRELATION_ID, parse_idempotency_key

Query = Mapping[str, Sequence[str]]

DEFAULT_LIST_LIMIT: Final = 100
MAX_LIST_LIMIT: Final = 500
JOB_STATUSES: Final = tuple(status.value for status in JobStatus)
_TRUE: Final = frozenset({"1", "true"})
_FALSE: Final = frozenset({"", "0", "false"})


def single(query: Query, name: str) -> str | None:
    """The value of a query parameter given once; '' stands for a repeated parameter's failure."""
    values = query.get(name)
    if values is None:
        return None
    return values[0] if len(values) == 1 else ""


def parse_events_query(query: Query) -> tuple[str | None, bool]:
    """`after` and `unacked` of `GET /jobs/{id}/events`."""
    after = single(query, "after")
    if after is not None and after == "":
        raise invalid_params("after must be a non-empty event_id", detail={"field": "after"})
    unacked_values = query.get("unacked")
    unacked = False
    if unacked_values is not None:
        value = unacked_values[0] if len(unacked_values) == 1 else None
        if value in _TRUE:
            unacked = True
        elif value not in _FALSE:
            raise invalid_params("unacked must be 1 or 0", detail={"field": "unacked"})
    return after, unacked


def parse_ack_body(body: Any) -> str:
    """`ack_through` of `POST /jobs/{id}/events/ack`."""
    if not isinstance(body, dict):
        raise invalid_params("request body must be a JSON object")
    ack_through = body.get("ack_through")
    if not isinstance(ack_through, str) or ack_through == "":
        raise invalid_params("ack_through is required", detail={"field": "ack_through"})
    return ack_through


@dataclass(frozen=True, slots=True)
class JobListQuery:
    idempotency_key: str | None
    correlation_id: str | None
    status: str | None
    limit: int
    cursor: str | None


def parse_list_query(query: Query) -> JobListQuery:
    """Filters of `GET /jobs`: idempotency_key, correlation_id, status, limit, cursor."""
    key = single(query, "idempotency_key")
    if key is not None:
        if is_blank(key):
            raise invalid_params("idempotency_key is required")  # the reference's words
        # Admission's rule and words: the key a job is known by is the trimmed one, and no
        # job carries one longer than admission allows.
        key = parse_idempotency_key(key)
    correlation_id = single(query, "correlation_id")
    if correlation_id is not None and correlation_id == "":
        raise invalid_params(
            "correlation_id must be a non-empty string", detail={"field": "correlation_id"}
        )
    # No job can carry a longer one (admission's limit), and it is part of an index key.
    if correlation_id is not None and js_length(correlation_id) > MAX_CORRELATION_ID:
        raise invalid_params(
            f"correlation_id must be at most {MAX_CORRELATION_ID} characters",
            detail={"field": "correlation_id"},
        )
    status = single(query, "status")
    if status is not None and status not in JOB_STATUSES:
        raise invalid_params(
            f"status must be one of {', '.join(JOB_STATUSES)}", detail={"field": "status"}
        )
    limit_text = single(query, "limit")
    limit = DEFAULT_LIST_LIMIT if limit_text is None else _parse_limit(limit_text)
    cursor = single(query, "cursor")
    if cursor is not None and cursor == "":
        raise invalid_params(
            "cursor must be a cursor this API returned", detail={"field": "cursor"}
        )
    return JobListQuery(key, correlation_id, status, limit, cursor)


def _parse_limit(text: str) -> int:
    return parse_bounded(text, "limit", 1, MAX_LIST_LIMIT)


def parse_bounded(text: str, field: str, low: int, high: int) -> int:
    # Its digits are counted before int() reads them: int() refuses over 4,300 digits. Zeros
    # alone ("0", "000") leave no significant digit: the value is 0.
    significant = text.lstrip("0") or "0"
    if (
        not (text.isascii() and text.isdigit())
        or len(significant) > len(str(high))
        or not low <= int(significant) <= high
    ):
        raise invalid_params(
            f"{field} must be an integer from {low} to {high}", detail={"field": field}
        )
    return int(significant)


DEFAULT_FEED_LIMIT: Final = 100
MAX_FEED_LIMIT: Final = 200
MAX_FEED_WAIT_MS: Final = 20_000
# A named cursor's name: the consumer's own word for one reader of its feed.
_CONSUMER_NAME: Final = re.compile(r"[A-Za-z0-9._:-]{1,64}")


@dataclass(frozen=True, slots=True)
class FeedQuery:
    after: str | None
    consumer: str | None
    limit: int
    wait_ms: int


def parse_feed_query(query: Query) -> FeedQuery:
    """`after`, `consumer`, `limit` and `wait_ms` of `GET /events` (an extension of v1)."""
    after = single(query, "after")
    if after is not None and after == "":
        raise invalid_params("after must be a cursor this API returned", detail={"field": "after"})
    consumer = single(query, "consumer")
    if consumer is not None:
        consumer = parse_consumer_name(consumer)
        if after is not None:
            raise invalid_params("give after or consumer, not both", detail={"field": "consumer"})
    limit_text = single(query, "limit")
    limit = (
        DEFAULT_FEED_LIMIT
        if limit_text is None
        else parse_bounded(limit_text, "limit", 1, MAX_FEED_LIMIT)
    )
    wait_text = single(query, "wait_ms")
    wait_ms = 0 if wait_text is None else parse_bounded(wait_text, "wait_ms", 0, MAX_FEED_WAIT_MS)
    return FeedQuery(after, consumer, limit, wait_ms)


def parse_consumer_name(value: Any) -> str:
    if not isinstance(value, str) or _CONSUMER_NAME.fullmatch(value) is None:
        raise invalid_params(
            "consumer must be 1 to 64 letters, digits or . _ : -", detail={"field": "consumer"}
        )
    return value


def parse_feed_ack_body(body: Any) -> tuple[str, str]:
    """`consumer` and `through` of `POST /events/ack`."""
    if not isinstance(body, dict):
        raise invalid_params("request body must be a JSON object")
    consumer = parse_consumer_name(body.get("consumer"))
    through = body.get("through")
    if not isinstance(through, str) or through == "":
        raise invalid_params("through is required", detail={"field": "through"})
    return consumer, through
