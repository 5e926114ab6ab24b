"""Builders of every document jobstream produces. Pure: state and a clock value in, dicts out."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from jobstream.domain import SLOT_WAIT_STAGE, JobRecord, JobStatus, ShownJob, StoredEvent
from jobstream.protocol.errors import (
    REASON_MESSAGES,
    code_for_reason,
    parse_reason,
)
from jobstream.protocol.events import TERMINAL_KINDS, EventType, event_id, protocol_type
from jobstream.protocol.pages import fill_page
from jobstream.protocol.queries import MAX_FEED_LIMIT, MAX_FEED_WAIT_MS
from jobstream.protocol.task import PROTOCOL_VERSION

PAGE_SIZE: Final = 200
# The protocol's closed vocabulary of job-type features; a job type declares a subset.
FEATURES: Final = (
    "events",
    "progress",
    "cancel",
    "idempotency",
    "exclude",
    "tag_expansion",
    "target_selector",
)
# The stage each status shows; a running job shows its executor's, else its type's first.
_STAGE_BY_STATUS: Final = {
    JobStatus.QUEUED: "queued",
    JobStatus.SUCCEEDED: "done",
    JobStatus.FAILED: "failed",
    JobStatus.CANCELLED: "cancelled",
    JobStatus.EXPIRED: "expired",
}


class JobTypeWords(Protocol):
    """What a document says in a job type's own words (the job-type registry answers)."""

    def first_stage(self, name: str) -> str: ...

    def empty_result(self, name: str) -> Mapping[str, Any]: ...


def events_url(job_id: str, base_url: str | None) -> str:
    """Absolute when the request's origin is known, else relative (job ids are URL-safe)."""
    path = f"/jobs/{job_id}/events"
    return f"{base_url.rstrip('/')}{path}" if base_url else path


def job_error(record: ShownJob) -> dict[str, Any]:
    """The Error of a failed, cancelled or expired job."""
    code = code_for_reason(record.reason)
    reason = parse_reason(record.reason)
    message = record.reason_message or (
        REASON_MESSAGES[reason] if reason is not None else "internal error"
    )
    error: dict[str, Any] = {"code": code.value, "message": message, "retryable": code.retryable}
    if record.reason:
        error["detail"] = {"internal_code": record.reason}
    return error


def progress_document(stage: str, message: str | None, at: int) -> dict[str, Any]:
    """A Progress: the stage, the message when there is one, and when it was reported."""
    progress: dict[str, Any] = {"stage": stage}
    if message:
        progress["message"] = message
    progress["at"] = at
    return progress


def job_document(
    record: ShownJob,
    now: int,
    base_url: str | None = None,
    *,
    words: JobTypeWords,
) -> dict[str, Any]:
    """The Job projection, keys in the reference order."""
    # The executor's own stage shows while it runs (and a queued job's wait for a slot);
    # every other status names its stage.
    if record.status is JobStatus.RUNNING:
        stage = record.progress_stage or words.first_stage(record.job_type)
    elif record.status is JobStatus.QUEUED and record.progress_stage == SLOT_WAIT_STAGE:
        stage = SLOT_WAIT_STAGE
    else:
        stage = _STAGE_BY_STATUS[record.status]
    progress = progress_document(stage, record.progress_message, record.updated_at)
    document: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "job_id": record.job_id,
        "job_type": record.job_type,
        "status": record.status.value,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "started_at": record.started_at,
        "heartbeat_at": record.heartbeat_at,
        "deadline_at": record.deadline_at,
        "lease_active": record.lease_active(now),
        "lease_expires_at": record.lease_expires_at,
        "attempt": record.attempt,
        "progress": progress,
        "idempotency_key": record.idempotency_key,
    }
    if record.correlation_id:
        document["correlation_id"] = record.correlation_id
    if record.labels:
        document["labels"] = dict(record.labels)
    document["events_url"] = events_url(record.job_id, base_url)
    if record.status is JobStatus.SUCCEEDED:
        result = record.result
        document["result"] = (
            result
            if result is not None
            else copy.deepcopy(dict(words.empty_result(record.job_type)))
        )
    elif record.is_terminal:
        document["error"] = job_error(record)
    return document


def event_document(
    record: JobRecord,
    event: StoredEvent,
    now: int,
    base_url: str | None = None,
    *,
    words: JobTypeWords,
) -> dict[str, Any] | None:
    """One Event as the page and the callback show it; None for internal-only kinds."""
    event_type = protocol_type(event.kind)
    if event_type is None:
        return None
    document: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "event_id": event_id(record.job_id, event.at, event.sequence),
        "job_id": record.job_id,
        "type": event_type.value,
        "at": event.at,
    }
    if record.correlation_id:
        document["correlation_id"] = record.correlation_id
    if record.labels:
        document["labels"] = dict(record.labels)
    payload: dict[str, Any] = {"detail": {"internal_kind": event.kind}}
    if event.progress_stage is not None:
        # What the executor reported then, kept on the event: the job's moves on.
        payload["progress"] = progress_document(
            event.progress_stage, event.progress_message, event.at
        )
    if event.kind in TERMINAL_KINDS:
        job = job_document(record, now, base_url, words=words)
        payload["job"] = job
        if event_type is EventType.SUCCEEDED:
            payload["result"] = job.get("result")
        else:
            payload["error"] = job.get("error")
    document["payload"] = payload
    return document


def event_page(
    record: JobRecord,
    events: Sequence[StoredEvent],
    *,
    has_more: bool,
    now: int,
    base_url: str | None = None,
    words: JobTypeWords,
) -> dict[str, Any]:
    """An EventPage; `next_after` only when another page exists: more events were read than
    the page shows (`has_more`), or the page is full by bytes (`pages.fill_page`). `record`
    must be at least as new as every event on the page (its terminal events embed it, its
    counts bound them)."""
    taken, cut = fill_page(
        events, lambda event: event_document(record, event, now, base_url, words=words)
    )
    documents = [document for _, document in taken]
    page: dict[str, Any] = {"job_id": record.job_id, "events": documents}
    if (has_more or cut) and documents:
        page["next_after"] = documents[-1]["event_id"]
    page["unacked"] = unacked_count(record)
    page["server_time"] = now
    return page


def unacked_count(record: JobRecord) -> int:
    return max(0, record.event_count - record.ack_sequence)


def ack_result(record: JobRecord, now: int) -> dict[str, Any]:
    unacked = unacked_count(record)
    return {
        "job_id": record.job_id,
        "acked": record.event_count - unacked,
        "unacked": unacked,
        "server_time": now,
    }


def job_page(
    records: Sequence[ShownJob],
    *,
    next_cursor: str | None,
    now: int,
    base_url: str | None = None,
    words: JobTypeWords,
) -> dict[str, Any]:
    """A JobPage; `next_cursor` when another page exists. The caller chose `records` to fit
    (`pages.fill_page`)."""
    page: dict[str, Any] = {
        "jobs": [job_document(record, now, base_url, words=words) for record in records]
    }
    if next_cursor:
        page["next_cursor"] = next_cursor
    page["server_time"] = now
    return page


def submission(
    record: JobRecord, now: int, base_url: str | None = None, *, words: JobTypeWords
) -> dict[str, Any]:
    """The `POST /jobs` body: exactly one key, `job`."""
    return {"job": job_document(record, now, base_url, words=words)}


class DeclaredJobType(Protocol):
    """What capabilities says about a job type (the job-type registry's `JobType` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def params_schema(self) -> str: ...

    @property
    def result_schema(self) -> str: ...

    @property
    def features(self) -> Sequence[str]: ...

    @property
    def limits(self) -> Mapping[str, int]: ...


def capabilities(
    *,
    job_types: Sequence[DeclaredJobType],
    queued_timeout_ms: int,
    stall_timeout_ms: int,
    heartbeat_interval_ms: int,
    default_deadline_ms: int,
    now: int,
) -> dict[str, Any]:
    """The capabilities document, built from live configuration on every call."""
    budgets = {
        "queued_timeout_ms": queued_timeout_ms,
        "stall_timeout_ms": stall_timeout_ms,
        "heartbeat_interval_ms": heartbeat_interval_ms,
        "default_deadline_ms": default_deadline_ms,
    }
    document: dict[str, Any] = {
        "protocol_versions": [PROTOCOL_VERSION],
        "job_types": [
            {
                "name": entry.name,
                "params_schema": entry.params_schema,
                "result_schema": entry.result_schema,
                "features": list(entry.features),
                **budgets,
            }
            for entry in job_types
        ],
    }
    limits = {entry.name: dict(entry.limits) for entry in job_types if entry.limits}
    if limits:
        # Per job type, so a consumer can size a Task before it is refused (e.g. asset counts).
        document["limits"] = {"job_types": limits}
    # What this producer serves beyond v1, by name (the closed `features` list cannot say it).
    document["extensions"] = {
        "event_feed": {
            "version": 1,
            "feed": "/events",
            "ack": "/events/ack",
            "max_limit": MAX_FEED_LIMIT,
            "max_wait_ms": MAX_FEED_WAIT_MS,
            "named_cursors": True,
        },
        "deliveries": {
            "version": 1,
            "job_callbacks": "/jobs/{job_id}/callbacks",
            "dead_letters": "/callbacks",
            "redrive": "/callbacks/redrive",
        },
    }
    document["server_time"] = now
    return document


def without_clock(document: Mapping[str, Any]) -> dict[str, Any]:
    """A document without its `server_time`: what stays the same while what the document
    describes does (the clock's reading is when it was built, not a change to it)."""
    return {key: value for key, value in document.items() if key != "server_time"}
