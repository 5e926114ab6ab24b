"""What a consumer sees of its callbacks' delivery (an extension of v1:
`GET /jobs/{job_id}/callbacks`, `GET /callbacks?state=dead|pending`, `POST /callbacks/redrive`).
Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from jobstream.domain import (
    OPEN_CALLBACK_STATES,
    CallbackRecord,
    CallbackState,
    EndpointHealth,
    EndpointState,
    JobRecord,
)
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.events import event_id, protocol_type
from jobstream.protocol.queries import Query, parse_bounded, single
from jobstream.protocol.sealed import seal, unseal

# The delivery states as a consumer reads them (the stored names are the producer's own).
STATE_WORDS: Final[dict[str, str]] = {
    CallbackState.PENDING: "pending",
    CallbackState.IN_FLIGHT: "sending",
    CallbackState.RETRY_WAIT: "retrying",
    CallbackState.DELIVERED: "delivered",
    CallbackState.DEAD: "dead",
    # Held while its endpoint is paused or disabled (endpoint health): no attempt is spent.
    CallbackState.PARKED: "paused",
}


def delivery(callback: CallbackRecord) -> dict[str, Any]:
    """One callback: its event, where its delivery stands, and how its attempts went."""
    event_type = protocol_type(callback.kind)
    document: dict[str, Any] = {
        "event_id": event_id(callback.job_id, callback.created_at, callback.sequence),
        "type": event_type.value if event_type is not None else callback.kind,
        "state": STATE_WORDS.get(callback.state, str(callback.state)),
        "attempts": callback.attempts,
        "max_attempts": callback.max_attempts,
    }
    if callback.last_status is not None:
        document["last_status"] = callback.last_status
    if callback.last_error is not None:
        document["last_error"] = callback.last_error
    if callback.state in OPEN_CALLBACK_STATES:
        document["next_attempt_at"] = callback.next_attempt_at
    if callback.delivered_at is not None:
        document["delivered_at"] = callback.delivered_at
    if callback.dead_at is not None:
        document["dead_at"] = callback.dead_at
    return document


def endpoint_document(health: EndpointHealth) -> dict[str, Any]:
    """How the tenant's endpoint (its callbacks to one origin) stands: healthy, paused (after
    sustained failure: one probe an interval, the rest held) or disabled (the receiver answered
    410 Gone: nothing until it is enabled again)."""
    document: dict[str, Any] = {"origin": health.endpoint.origin, "health": health.state.value}
    if health.failures:
        document["consecutive_failures"] = health.failures
    if health.changed_at is not None:
        document["since"] = health.changed_at
    if health.next_probe_at is not None and health.state is EndpointState.PAUSED:
        document["next_probe_at"] = health.next_probe_at
    if health.last_error is not None:
        document["last_error"] = health.last_error
    return document


def job_deliveries(
    record: JobRecord,
    callbacks: Sequence[CallbackRecord],
    now: int,
    endpoint: EndpointHealth | None = None,
) -> dict[str, Any]:
    """The body of `GET /jobs/{job_id}/callbacks`: every callback of the job, in event order
    (none when the job has no callback URL), and the health of the endpoint they go to."""
    document: dict[str, Any] = {"job_id": record.job_id}
    if record.callback_url:
        document["callback_url"] = record.callback_url
    if endpoint is not None:
        document["endpoint"] = endpoint_document(endpoint)
    document["callbacks"] = [delivery(callback) for callback in callbacks]
    document["server_time"] = now
    return document


DEFAULT_CALLBACKS_LIMIT: Final = 100
MAX_CALLBACKS_LIMIT: Final = 500


def callback_page(
    callbacks: Sequence[CallbackRecord], *, next_cursor: str | None, now: int
) -> dict[str, Any]:
    """The body of `GET /callbacks`: the tenant's dead callbacks (oldest death first) or its
    pending ones (a failed attempt behind them; oldest event first), each with its job;
    `next_cursor` while more follow."""
    page: dict[str, Any] = {
        "callbacks": [{"job_id": callback.job_id, **delivery(callback)} for callback in callbacks]
    }
    if next_cursor is not None:
        page["next_cursor"] = next_cursor
    page["server_time"] = now
    return page


def redrive_result(revived: int, *, more: bool, now: int) -> dict[str, Any]:
    """The answer of `POST /callbacks/redrive`: how many dead callbacks are open again (each is
    sent once more, with a fresh budget); `more`, when the request stopped before the end: call
    it again for the rest."""
    return {"revived": revived, "more": more, "server_time": now}


def encode_callbacks_cursor(tenant: str, start: Mapping[str, Any]) -> str:
    """An opaque cursor of one of the tenant's callback listings, bound to the tenant."""
    return seal(tenant, json.dumps(start, separators=(",", ":"), sort_keys=True))


def decode_callbacks_cursor(tenant: str, cursor: str) -> dict[str, Any]:
    """What a cursor of this tenant's listing carries; 400 for anything else."""
    text = unseal(tenant, cursor)
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise invalid_params(
            "cursor must be a cursor this API returned for this consumer",
            detail={"field": "cursor"},
        )
    return value


LISTED_STATES: Final = ("dead", "pending")


def parse_callbacks_query(query: Query) -> tuple[str, int, str | None]:
    """`state` (dead, the default, or pending), `limit` and `cursor` of `GET /callbacks`."""
    state = single(query, "state")
    if state is None:
        state = "dead"
    if state not in LISTED_STATES:
        raise invalid_params("state must be dead or pending", detail={"field": "state"})
    limit_text = single(query, "limit")
    limit = DEFAULT_CALLBACKS_LIMIT
    if limit_text is not None:
        limit = parse_bounded(limit_text, "limit", 1, MAX_CALLBACKS_LIMIT)
    cursor = single(query, "cursor")
    if cursor is not None and cursor == "":
        raise invalid_params(
            "cursor must be a cursor this API returned", detail={"field": "cursor"}
        )
    return state, limit, cursor


def parse_redrive_body(body: Any) -> tuple[str | None, int | None]:
    """`job_id` or `since` (epoch ms) of `POST /callbacks/redrive`; neither: every dead one."""
    if body is None:
        return None, None
    if not isinstance(body, dict):
        raise invalid_params("request body must be a JSON object")
    unknown = sorted(set(body) - {"job_id", "since"})
    if unknown:
        raise invalid_params(f"unknown field {unknown[0]}", detail={"field": unknown[0]})
    if "job_id" in body and "since" in body:
        raise invalid_params("give job_id or since, not both", detail={"field": "since"})
    job_id = body.get("job_id")
    if "job_id" in body and (not isinstance(job_id, str) or job_id == ""):
        raise invalid_params("job_id must be a non-empty string", detail={"field": "job_id"})
    since = body.get("since")
    if "since" in body and (
        isinstance(since, bool) or not isinstance(since, int) or not 0 <= since < 10**15
    ):
        raise invalid_params("since must be a time in epoch ms", detail={"field": "since"})
    return job_id, since


def endpoint_list(healths: Sequence[EndpointHealth], now: int) -> dict[str, Any]:
    """The body of `GET /callbacks/endpoints`: every endpoint of the tenant that has a recorded
    health (one that never failed is healthy and not listed)."""
    return {"endpoints": [endpoint_document(health) for health in healths], "server_time": now}


def enable_result(health: EndpointHealth, *, enabled: bool, now: int) -> dict[str, Any]:
    """The answer of `POST /callbacks/endpoints/enable`: the endpoint as it stands now, and
    whether this request re-enabled it (false: it was not paused or disabled)."""
    return {"endpoint": endpoint_document(health), "enabled": enabled, "server_time": now}


def parse_enable_body(body: Any) -> str:
    """`origin` of `POST /callbacks/endpoints/enable` (an origin or a URL under it)."""
    if not isinstance(body, dict):
        raise invalid_params("request body must be a JSON object")
    origin = body.get("origin")
    if not isinstance(origin, str) or origin == "":
        raise invalid_params("origin is required", detail={"field": "origin"})
    return origin
