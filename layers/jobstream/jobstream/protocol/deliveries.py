"""What a consumer sees of its callbacks' delivery (an extension of v1:
`GET /jobs/{job_id}/callbacks`). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from jobstream.domain import OPEN_CALLBACK_STATES, CallbackRecord, CallbackState, JobRecord
from jobstream.protocol.events import event_id, protocol_type

# The delivery states as a consumer reads them (the stored names are the producer's own).
STATE_WORDS: Final[dict[str, str]] = {
    CallbackState.PENDING: "pending",
    CallbackState.IN_FLIGHT: "sending",
    CallbackState.RETRY_WAIT: "retrying",
    CallbackState.DELIVERED: "delivered",
    CallbackState.DEAD: "dead",
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


def job_deliveries(
    record: JobRecord, callbacks: Sequence[CallbackRecord], now: int
) -> dict[str, Any]:
    """The body of `GET /jobs/{job_id}/callbacks`: every callback of the job, in event order
    (none when the job has no callback URL)."""
    document: dict[str, Any] = {"job_id": record.job_id}
    if record.callback_url:
        document["callback_url"] = record.callback_url
    document["callbacks"] = [delivery(callback) for callback in callbacks]
    document["server_time"] = now
    return document
