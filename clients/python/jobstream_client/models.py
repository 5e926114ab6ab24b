"""The protocol's documents as typed, read-only values.

Decoding is tolerant the way the protocol asks (unknown fields are ignored, absent and `null`
optional fields are the same) and strict where a consumer would otherwise act on garbage (a
required field missing or of the wrong type raises `DocumentError`, a ValueError). Every model
keeps the document it was read from in `raw`, unknown fields included.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Required, TypedDict, TypeVar

PROTOCOL_VERSION: Final = "1"
STATUSES: Final = ("queued", "running", "succeeded", "failed", "cancelled", "expired")
TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "cancelled", "expired"})
TERMINAL_EVENT_TYPES: Final = frozenset(
    {"job.succeeded", "job.failed", "job.expired", "job.cancelled"}
)

T = TypeVar("T")
Document = Mapping[str, Any]


class Task(TypedDict, total=False):
    """What `Client.submit` sends (the protocol's `Task`); extra keys are passed through."""

    protocol_version: Required[str]
    job_type: Required[str]
    idempotency_key: Required[str]
    params: Required[dict[str, Any]]
    correlation_id: str
    labels: dict[str, str]
    callback_url: str
    deadline_ms: int


def new_task(
    job_type: str,
    params: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    correlation_id: str | None = None,
    labels: Mapping[str, str] | None = None,
    callback_url: str | None = None,
    deadline_ms: int | None = None,
) -> Task:
    """A Task; a random idempotency key when none is given (keep it to resubmit safely)."""
    task: Task = {
        "protocol_version": PROTOCOL_VERSION,
        "job_type": job_type,
        "idempotency_key": idempotency_key or f"task-{uuid.uuid4()}",
        "params": dict(params),
    }
    if correlation_id is not None:
        task["correlation_id"] = correlation_id
    if labels is not None:
        task["labels"] = dict(labels)
    if callback_url is not None:
        task["callback_url"] = callback_url
    if deadline_ms is not None:
        task["deadline_ms"] = deadline_ms
    return task


class DocumentError(ValueError):
    """A document lacks a required field, or a field has the wrong type."""


def _field(document: Document, name: str, kind: type[T], *, where: str) -> T:
    value = document.get(name)
    # bool is an int in Python; the protocol's integers never are booleans.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DocumentError(f"{where}.{name} must be {kind.__name__}, got {value!r}")
    return value


def _optional(document: Document, name: str, kind: type[T], *, where: str) -> T | None:
    if document.get(name) is None:
        return None
    return _field(document, name, kind, where=where)


def _object(value: Any, *, where: str) -> Document:
    if not isinstance(value, Mapping):
        raise DocumentError(f"{where} must be a JSON object, got {value!r}")
    return value


def _dict(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _labels(value: Any) -> dict[str, str] | None:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class ErrorInfo:
    """The protocol's `Error`: branch on `code` and `retryable`, never on `message`."""

    code: str
    retryable: bool
    message: str | None = None
    detail: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, document: Any, *, where: str = "Error") -> ErrorInfo:
        data = _object(document, where=where)
        return cls(
            code=_field(data, "code", str, where=where),
            retryable=_field(data, "retryable", bool, where=where),
            message=_optional(data, "message", str, where=where),
            detail=_dict(data.get("detail")),
        )

    @classmethod
    def from_envelope(cls, envelope: Any) -> ErrorInfo | None:
        """The `error` of an error body, or None when it is not a protocol envelope."""
        try:
            return cls.from_dict(envelope)
        except ValueError:
            return None


@dataclass(frozen=True)
class Progress:
    stage: str
    message: str | None = None
    at: int | None = None

    @classmethod
    def from_dict(cls, document: Any, *, where: str = "Job.progress") -> Progress:
        data = _object(document, where=where)
        return cls(
            stage=_field(data, "stage", str, where=where),
            message=_optional(data, "message", str, where=where),
            at=_optional(data, "at", int, where=where),
        )


@dataclass(frozen=True)
class Job:
    """The protocol's `Job` (times are epoch milliseconds)."""

    job_id: str
    job_type: str
    status: str
    created_at: int
    updated_at: int
    protocol_version: str = PROTOCOL_VERSION
    idempotency_key: str | None = None
    correlation_id: str | None = None
    labels: dict[str, str] | None = None
    started_at: int | None = None
    heartbeat_at: int | None = None
    deadline_at: int | None = None
    lease_expires_at: int | None = None
    lease_active: bool | None = None
    attempt: int | None = None
    progress: Progress | None = None
    result: dict[str, Any] | None = None
    error: ErrorInfo | None = None
    events_url: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_dict(cls, document: Any, *, where: str = "Job") -> Job:
        data = _object(document, where=where)
        progress = data.get("progress")
        error = data.get("error")
        return cls(
            protocol_version=_field(data, "protocol_version", str, where=where),
            job_id=_field(data, "job_id", str, where=where),
            job_type=_field(data, "job_type", str, where=where),
            status=_field(data, "status", str, where=where),
            created_at=_field(data, "created_at", int, where=where),
            updated_at=_field(data, "updated_at", int, where=where),
            idempotency_key=_optional(data, "idempotency_key", str, where=where),
            correlation_id=_optional(data, "correlation_id", str, where=where),
            labels=_labels(data.get("labels")),
            started_at=_optional(data, "started_at", int, where=where),
            heartbeat_at=_optional(data, "heartbeat_at", int, where=where),
            deadline_at=_optional(data, "deadline_at", int, where=where),
            lease_expires_at=_optional(data, "lease_expires_at", int, where=where),
            lease_active=_optional(data, "lease_active", bool, where=where),
            attempt=_optional(data, "attempt", int, where=where),
            progress=Progress.from_dict(progress) if progress is not None else None,
            result=_dict(data.get("result")),
            error=ErrorInfo.from_dict(error, where=f"{where}.error") if error is not None else None,
            events_url=_optional(data, "events_url", str, where=where),
            raw=dict(data),
        )


@dataclass(frozen=True)
class Event:
    """The protocol's `Event`. Consumers dedupe on `event_id`; `payload.job` (on terminal events)
    is the job as it was when the event was built."""

    event_id: str
    job_id: str
    type: str
    at: int
    protocol_version: str = PROTOCOL_VERSION
    correlation_id: str | None = None
    labels: dict[str, str] | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL_EVENT_TYPES

    @property
    def job(self) -> Job | None:
        document = self.payload.get("job")
        return Job.from_dict(document, where="Event.payload.job") if document else None

    @property
    def result(self) -> dict[str, Any] | None:
        return _dict(self.payload.get("result"))

    @property
    def progress(self) -> Progress | None:
        """What a `job.progress` event reported (a producer that says nothing more: None)."""
        document = self.payload.get("progress")
        if document is None:
            return None
        return Progress.from_dict(document, where="Event.payload.progress")

    @property
    def error(self) -> ErrorInfo | None:
        document = self.payload.get("error")
        if document is None:
            return None
        return ErrorInfo.from_dict(document, where="Event.payload.error")

    @classmethod
    def from_dict(cls, document: Any, *, where: str = "Event") -> Event:
        data = _object(document, where=where)
        return cls(
            protocol_version=_field(data, "protocol_version", str, where=where),
            event_id=_field(data, "event_id", str, where=where),
            job_id=_field(data, "job_id", str, where=where),
            type=_field(data, "type", str, where=where),
            at=_field(data, "at", int, where=where),
            correlation_id=_optional(data, "correlation_id", str, where=where),
            labels=_labels(data.get("labels")),
            payload=_dict(data.get("payload")) or {},
            raw=dict(data),
        )


@dataclass(frozen=True)
class EventPage:
    """One page of a job's events, ascending; `next_after` is set while more pages exist."""

    job_id: str
    events: tuple[Event, ...]
    next_after: str | None = None
    unacked: int | None = None
    server_time: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, document: Any) -> EventPage:
        data = _object(document, where="EventPage")
        events = _field(data, "events", list, where="EventPage")
        return cls(
            job_id=_field(data, "job_id", str, where="EventPage"),
            events=tuple(
                Event.from_dict(item, where=f"EventPage.events[{n}]")
                for n, item in enumerate(events)
            ),
            # Empty or absent both mean "caught up".
            next_after=_optional(data, "next_after", str, where="EventPage") or None,
            unacked=_optional(data, "unacked", int, where="EventPage"),
            server_time=_optional(data, "server_time", int, where="EventPage"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class JobPage:
    """One page of `GET /jobs`; `next_cursor` is set while more pages exist."""

    jobs: tuple[Job, ...]
    next_cursor: str | None = None
    server_time: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, document: Any) -> JobPage:
        data = _object(document, where="JobPage")
        jobs = _field(data, "jobs", list, where="JobPage")
        return cls(
            jobs=tuple(
                Job.from_dict(item, where=f"JobPage.jobs[{n}]") for n, item in enumerate(jobs)
            ),
            next_cursor=_optional(data, "next_cursor", str, where="JobPage") or None,
            server_time=_optional(data, "server_time", int, where="JobPage"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class AckResult:
    """`acked` counts the events at or before the consumer's cursor, `unacked` those after it."""

    job_id: str
    acked: int
    unacked: int
    server_time: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, document: Any) -> AckResult:
        data = _object(document, where="AckResult")
        return cls(
            job_id=_field(data, "job_id", str, where="AckResult"),
            acked=_field(data, "acked", int, where="AckResult"),
            unacked=_field(data, "unacked", int, where="AckResult"),
            server_time=_optional(data, "server_time", int, where="AckResult"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class FeedPage:
    """One page of the tenant's feed (the `event_feed` extension): events of every job, in the
    order they committed; `next_after` is where to read on (always set), `has_more` says the
    next page has events already."""

    events: tuple[Event, ...]
    next_after: str
    has_more: bool
    consumer: str | None = None
    server_time: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, document: Any) -> FeedPage:
        data = _object(document, where="FeedPage")
        events = _field(data, "events", list, where="FeedPage")
        return cls(
            events=tuple(
                Event.from_dict(item, where=f"FeedPage.events[{n}]")
                for n, item in enumerate(events)
            ),
            next_after=_field(data, "next_after", str, where="FeedPage"),
            has_more=_field(data, "has_more", bool, where="FeedPage"),
            consumer=_optional(data, "consumer", str, where="FeedPage"),
            server_time=_optional(data, "server_time", int, where="FeedPage"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class FeedAck:
    """Where a named cursor of the feed stands after an ack (never behind where it was)."""

    consumer: str
    through: str
    server_time: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, document: Any) -> FeedAck:
        data = _object(document, where="FeedAck")
        return cls(
            consumer=_field(data, "consumer", str, where="FeedAck"),
            through=_field(data, "through", str, where="FeedAck"),
            server_time=_optional(data, "server_time", int, where="FeedAck"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class Delivery:
    """One callback of a job, as the producer delivered it (the deliveries extension)."""

    event_id: str
    type: str
    state: str  # pending, sending, retrying, delivered, dead (others may be added)
    attempts: int
    max_attempts: int
    last_status: int | None = None
    last_error: str | None = None
    next_attempt_at: int | None = None
    delivered_at: int | None = None
    dead_at: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, document: Any, *, where: str = "Delivery") -> Delivery:
        data = _object(document, where=where)
        return cls(
            event_id=_field(data, "event_id", str, where=where),
            type=_field(data, "type", str, where=where),
            state=_field(data, "state", str, where=where),
            attempts=_field(data, "attempts", int, where=where),
            max_attempts=_field(data, "max_attempts", int, where=where),
            last_status=_optional(data, "last_status", int, where=where),
            last_error=_optional(data, "last_error", str, where=where),
            next_attempt_at=_optional(data, "next_attempt_at", int, where=where),
            delivered_at=_optional(data, "delivered_at", int, where=where),
            dead_at=_optional(data, "dead_at", int, where=where),
            raw=dict(data),
        )


@dataclass(frozen=True)
class JobType:
    """One `JobTypeDeclaration` of the capabilities (budgets in milliseconds)."""

    name: str
    params_schema: str | None = None
    result_schema: str | None = None
    features: tuple[str, ...] = ()
    queued_timeout_ms: int | None = None
    stall_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    default_deadline_ms: int | None = None

    @classmethod
    def from_dict(cls, document: Any, *, where: str) -> JobType:
        data = _object(document, where=where)
        features: Sequence[Any] = data.get("features") or ()
        return cls(
            name=_field(data, "name", str, where=where),
            params_schema=_optional(data, "params_schema", str, where=where),
            result_schema=_optional(data, "result_schema", str, where=where),
            features=tuple(str(feature) for feature in features),
            queued_timeout_ms=_optional(data, "queued_timeout_ms", int, where=where),
            stall_timeout_ms=_optional(data, "stall_timeout_ms", int, where=where),
            heartbeat_interval_ms=_optional(data, "heartbeat_interval_ms", int, where=where),
            default_deadline_ms=_optional(data, "default_deadline_ms", int, where=where),
        )


@dataclass(frozen=True)
class Capabilities:
    protocol_versions: tuple[str, ...]
    job_types: tuple[JobType, ...]
    server_time: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def supports(self, version: str = PROTOCOL_VERSION) -> bool:
        """True when `version`'s major is served (`"1"` matches `"1"` and `"1.1"`)."""
        major = version.split(".", 1)[0]
        return any(served.split(".", 1)[0] == major for served in self.protocol_versions)

    def job_type(self, name: str) -> JobType | None:
        return next((declared for declared in self.job_types if declared.name == name), None)

    def extension(self, name: str) -> dict[str, Any] | None:
        """What the producer declares of an extension it serves beyond v1 (`event_feed`), or
        None when it does not serve it."""
        extensions = self.raw.get("extensions")
        declared = extensions.get(name) if isinstance(extensions, dict) else None
        return dict(declared) if isinstance(declared, dict) else None

    @classmethod
    def from_dict(cls, document: Any) -> Capabilities:
        data = _object(document, where="Capabilities")
        versions = _field(data, "protocol_versions", list, where="Capabilities")
        job_types = _field(data, "job_types", list, where="Capabilities")
        return cls(
            protocol_versions=tuple(str(version) for version in versions),
            job_types=tuple(
                JobType.from_dict(item, where=f"Capabilities.job_types[{n}]")
                for n, item in enumerate(job_types)
            ),
            server_time=_optional(data, "server_time", int, where="Capabilities"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class Submission:
    """The answer to `submit`: the job, and whether the key already named it (HTTP 200) or this
    request created it (HTTP 202). After a retried network failure a replay may be this client's
    own earlier attempt: `attempts` says how many requests were sent."""

    job: Job
    replayed: bool
    attempts: int = 1
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def created(self) -> bool:
        return not self.replayed
