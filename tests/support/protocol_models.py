"""Pydantic models of the protocol objects jobstream produces and parses but never builds from a
model at run time (Task, Job, Event, the pages, Capabilities, ...): tests read fixtures and our
documents through them. The objects a job type's result is made of live in the layer.

Unknown fields are kept and ignored (the protocol is additive-only).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from jobstream.jobtypes.candidate_search.result import (
    Candidate,
    MatchedTag,
    ResultCandidateSearch,
)
from jobstream.protocol.models import Asset, Locator, NonNegativeInt, ProtocolModel

NonEmptyStr = Annotated[StrictStr, Field(min_length=1)]
ProtocolVersion = Literal["1"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "expired"]
EventType = Literal[
    "job.accepted",
    "job.started",
    "job.progress",
    "job.succeeded",
    "job.failed",
    "job.expired",
    "job.cancelled",
]
Labels = dict[str, StrictStr]
Feature = Literal[
    "events", "progress", "cancel", "idempotency", "exclude", "tag_expansion", "target_selector"
]


class Error(ProtocolModel):
    code: Literal[
        "no_candidate",
        "source_error",
        "auth_error",
        "quota_exceeded",
        "resource_busy",
        "queued_too_long",
        "stalled_no_progress",
        "deadline_exceeded",
        "cancelled_by_consumer",
        "idempotency_conflict",
        "unsupported_protocol_version",
        "invalid_params",
        "delivery_failed",
        "delivery_rejected",
        "delivery_abandoned",
        "internal_error",
    ]
    message: StrictStr | None = None
    retryable: StrictBool | None = None
    detail: dict[str, Any] | None = None


class ErrorEnvelope(ProtocolModel):
    error: Error


class SourceSelector(ProtocolModel):
    platform: Literal["pixiv"] | None = None
    account: StrictStr | None = None


class Query(ProtocolModel):
    tags: Annotated[list[StrictStr], Field(min_length=1)]
    expand: StrictBool | None = None


class Exclusion(ProtocolModel):
    kind: Literal["work", "candidate", "tag"]
    id: StrictStr


class Constraints(ProtocolModel):
    exclude: list[Exclusion] | None = None
    limit: Annotated[StrictInt, Field(ge=1)] | None = None
    scan_limit: Annotated[StrictInt, Field(ge=1)] | None = None
    work_types: list[StrictStr] | None = None


class CandidateSearchParams(ProtocolModel):
    target_id: StrictStr | None = None
    source: SourceSelector | None = None
    query: Query | None = None
    constraints: Constraints | None = None


class Task(ProtocolModel):
    protocol_version: ProtocolVersion
    job_type: StrictStr
    idempotency_key: NonEmptyStr
    correlation_id: StrictStr | None = None
    labels: Labels | None = None
    callback_url: StrictStr | None = None
    deadline_ms: Annotated[StrictInt, Field(ge=1000)] | None = None
    params: dict[str, Any]


class Progress(ProtocolModel):
    stage: StrictStr
    message: StrictStr | None = None
    at: NonNegativeInt | None = None


class Job(ProtocolModel):
    protocol_version: ProtocolVersion
    job_id: NonEmptyStr
    job_type: StrictStr
    status: JobStatus
    created_at: NonNegativeInt
    updated_at: NonNegativeInt
    started_at: NonNegativeInt | None = None
    heartbeat_at: NonNegativeInt | None = None
    deadline_at: NonNegativeInt | None = None
    lease_active: StrictBool | None = None
    lease_expires_at: NonNegativeInt | None = None
    attempt: NonNegativeInt | None = None
    progress: Progress | None = None
    idempotency_key: StrictStr | None = None
    correlation_id: StrictStr | None = None
    labels: Labels | None = None
    events_url: StrictStr | None = None
    result: dict[str, Any] | None = None
    error: Error | None = None


class JobReceipt(ProtocolModel):
    """The body of `POST /jobs`: the Job wrapped under one key."""

    job: Job


class EventPayload(ProtocolModel):
    detail: dict[str, Any] | None = None
    job: Job | None = None
    result: dict[str, Any] | None = None
    error: Error | None = None


class Event(ProtocolModel):
    protocol_version: ProtocolVersion
    event_id: NonEmptyStr
    job_id: NonEmptyStr
    type: EventType
    at: NonNegativeInt
    correlation_id: StrictStr | None = None
    labels: Labels | None = None
    payload: EventPayload | None = None


class JobPage(ProtocolModel):
    jobs: list[Job]
    next_cursor: StrictStr | None = None
    server_time: NonNegativeInt | None = None


class EventPage(ProtocolModel):
    job_id: StrictStr
    events: list[Event]
    next_after: StrictStr | None = None
    unacked: NonNegativeInt | None = None
    server_time: NonNegativeInt | None = None


class AckRequest(ProtocolModel):
    ack_through: NonEmptyStr


class AckResult(ProtocolModel):
    job_id: StrictStr
    acked: NonNegativeInt
    unacked: NonNegativeInt
    server_time: NonNegativeInt | None = None


class JobTypeDeclaration(ProtocolModel):
    name: StrictStr
    params_schema: StrictStr
    result_schema: StrictStr
    features: list[Feature] | None = None
    queued_timeout_ms: NonNegativeInt | None = None
    stall_timeout_ms: NonNegativeInt | None = None
    heartbeat_interval_ms: NonNegativeInt | None = None
    default_deadline_ms: NonNegativeInt | None = None


class Capabilities(ProtocolModel):
    protocol_versions: Annotated[list[ProtocolVersion], Field(min_length=1)]
    job_types: list[JobTypeDeclaration]
    sources: list[dict[str, Any]] | None = None
    asset_types: list[StrictStr] | None = None
    asset_quality: list[StrictStr] | None = None
    limits: dict[str, Any] | None = None
    server_time: NonNegativeInt | None = None


# Which model a fixture or document kind names (the schema's $defs names).
MODELS_BY_DEF: dict[str, type[ProtocolModel]] = {
    "Error": Error,
    "Task": Task,
    "Progress": Progress,
    "Job": Job,
    "Event": Event,
    "JobPage": JobPage,
    "EventPage": EventPage,
    "AckRequest": AckRequest,
    "AckResult": AckResult,
    "Locator": Locator,
    "Asset": Asset,
    "MatchedTag": MatchedTag,
    "Candidate": Candidate,
    "CandidateSearchParams": CandidateSearchParams,
    "Result_CandidateSearch": ResultCandidateSearch,
    "JobTypeDeclaration": JobTypeDeclaration,
    "Capabilities": Capabilities,
}
