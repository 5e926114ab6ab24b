"""The error catalogue: the closed protocol code enum, its defaults, and the one reason table."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

from jobstream.errors import JobstreamError


class ErrorCode(StrEnum):
    NO_CANDIDATE = "no_candidate"
    SOURCE_ERROR = "source_error"
    AUTH_ERROR = "auth_error"
    QUOTA_EXCEEDED = "quota_exceeded"
    RESOURCE_BUSY = "resource_busy"
    QUEUED_TOO_LONG = "queued_too_long"
    STALLED_NO_PROGRESS = "stalled_no_progress"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    CANCELLED_BY_CONSUMER = "cancelled_by_consumer"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    UNSUPPORTED_PROTOCOL_VERSION = "unsupported_protocol_version"
    INVALID_PARAMS = "invalid_params"
    DELIVERY_FAILED = "delivery_failed"
    DELIVERY_REJECTED = "delivery_rejected"
    DELIVERY_ABANDONED = "delivery_abandoned"
    INTERNAL_ERROR = "internal_error"

    @property
    def retryable(self) -> bool:
        """The `retryable` flag a producer must send with this code."""
        return RETRYABLE[self]


# The `retryable` default a producer must send for each code (error-mapping.json).
RETRYABLE: Final[dict[ErrorCode, bool]] = {
    ErrorCode.NO_CANDIDATE: True,
    ErrorCode.SOURCE_ERROR: True,
    ErrorCode.AUTH_ERROR: False,
    ErrorCode.QUOTA_EXCEEDED: True,
    ErrorCode.RESOURCE_BUSY: True,
    ErrorCode.QUEUED_TOO_LONG: True,
    ErrorCode.STALLED_NO_PROGRESS: True,
    ErrorCode.DEADLINE_EXCEEDED: True,
    ErrorCode.CANCELLED_BY_CONSUMER: False,
    ErrorCode.IDEMPOTENCY_CONFLICT: False,
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION: False,
    ErrorCode.INVALID_PARAMS: False,
    ErrorCode.DELIVERY_FAILED: True,
    ErrorCode.DELIVERY_REJECTED: False,
    ErrorCode.DELIVERY_ABANDONED: True,
    ErrorCode.INTERNAL_ERROR: False,
}


class ErrorKind(StrEnum):
    """What kind of failure a request error is. The HTTP shell answers each kind with one
    status (`http/statuses.py`): no raise site chooses a status."""

    INVALID = "invalid"  # the request is wrong (400)
    UNAUTHENTICATED = "unauthenticated"  # no valid token (401)
    NOT_FOUND = "not_found"  # it names nothing the consumer may see (404)
    CONFLICT = "conflict"  # it contradicts what is stored or configured (409)
    TOO_LARGE = "too_large"  # its body is larger than the API takes (413)
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"  # its body is not JSON (415)
    TOO_MANY_REQUESTS = "too_many_requests"  # the tenant is at a quota (429)
    INTERNAL = "internal"  # a bug (500)
    UNAVAILABLE = "unavailable"  # the service cannot answer it now (503)


# The kind of a request error whose raise site names none.
DEFAULT_KIND: Final[dict[ErrorCode, ErrorKind]] = {
    ErrorCode.IDEMPOTENCY_CONFLICT: ErrorKind.CONFLICT,
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION: ErrorKind.INVALID,
    ErrorCode.INVALID_PARAMS: ErrorKind.INVALID,
    ErrorCode.AUTH_ERROR: ErrorKind.UNAUTHENTICATED,
    ErrorCode.QUOTA_EXCEEDED: ErrorKind.TOO_MANY_REQUESTS,
    ErrorCode.RESOURCE_BUSY: ErrorKind.UNAVAILABLE,
    ErrorCode.INTERNAL_ERROR: ErrorKind.INTERNAL,
}


class Reason(StrEnum):
    """Producer-internal terminal reasons; they cross the boundary only as detail.internal_code."""

    NO_CANDIDATE = "no_candidate"
    DUPLICATE_EXHAUSTED = "duplicate_exhausted"
    FILTER_EXHAUSTED = "filter_exhausted"
    DOWNLOAD_TIMEOUT = "download_timeout"
    DOWNLOAD_FAILED = "download_failed"
    METADATA_FAILED = "metadata_failed"
    RATE_LIMITED = "rate_limited"
    AUTH_FAILED = "auth_failed"
    REMOTE_HTTP_ERROR = "remote_http_error"
    DELIVERY_FAILED = "delivery_failed"
    TELEPOST_REJECTED = "telepost_rejected"
    TELEGRAM_FAILED = "telegram_failed"
    NETWORK_ERROR = "network_error"
    EXECUTION_TIMEOUT = "execution_timeout"
    CONFIGURATION_ERROR = "configuration_error"
    INTERNAL_ERROR = "internal_error"
    QUEUED_TOO_LONG = "queued_too_long"
    STALLED_NO_HEARTBEAT = "stalled_no_heartbeat"
    DELIVERY_ABANDONED = "delivery_abandoned"
    CANCELLED_BY_CONSUMER = "cancelled_by_consumer"


# THE internal-reason -> protocol-code table. Nothing else translates reasons.
REASON_TO_CODE: Final[dict[Reason, ErrorCode]] = {
    Reason.NO_CANDIDATE: ErrorCode.NO_CANDIDATE,
    Reason.DUPLICATE_EXHAUSTED: ErrorCode.NO_CANDIDATE,
    Reason.FILTER_EXHAUSTED: ErrorCode.NO_CANDIDATE,
    Reason.DOWNLOAD_TIMEOUT: ErrorCode.SOURCE_ERROR,
    Reason.DOWNLOAD_FAILED: ErrorCode.SOURCE_ERROR,
    Reason.METADATA_FAILED: ErrorCode.SOURCE_ERROR,
    Reason.REMOTE_HTTP_ERROR: ErrorCode.SOURCE_ERROR,
    Reason.NETWORK_ERROR: ErrorCode.SOURCE_ERROR,
    Reason.RATE_LIMITED: ErrorCode.QUOTA_EXCEEDED,
    Reason.AUTH_FAILED: ErrorCode.AUTH_ERROR,
    Reason.DELIVERY_FAILED: ErrorCode.DELIVERY_FAILED,
    Reason.TELEGRAM_FAILED: ErrorCode.DELIVERY_FAILED,
    Reason.TELEPOST_REJECTED: ErrorCode.DELIVERY_REJECTED,
    Reason.DELIVERY_ABANDONED: ErrorCode.DELIVERY_ABANDONED,
    Reason.CANCELLED_BY_CONSUMER: ErrorCode.CANCELLED_BY_CONSUMER,
    Reason.QUEUED_TOO_LONG: ErrorCode.QUEUED_TOO_LONG,
    Reason.STALLED_NO_HEARTBEAT: ErrorCode.STALLED_NO_PROGRESS,
    Reason.EXECUTION_TIMEOUT: ErrorCode.DEADLINE_EXCEEDED,
    Reason.CONFIGURATION_ERROR: ErrorCode.INTERNAL_ERROR,
    Reason.INTERNAL_ERROR: ErrorCode.INTERNAL_ERROR,
}

# Liveness verdicts: a job ending with one of these is `expired`, not `failed`.
EXPIRY_REASONS: Final[frozenset[Reason]] = frozenset(
    {Reason.QUEUED_TOO_LONG, Reason.STALLED_NO_HEARTBEAT, Reason.EXECUTION_TIMEOUT}
)

# Human text for a job's error when the executor stored no message of its own.
REASON_MESSAGES: Final[dict[Reason, str]] = {
    Reason.NO_CANDIDATE: "no candidate matched the request",
    Reason.DUPLICATE_EXHAUSTED: "every candidate found was a duplicate",
    Reason.FILTER_EXHAUSTED: "every candidate found was filtered out",
    Reason.DOWNLOAD_TIMEOUT: "downloading from the source timed out",
    Reason.DOWNLOAD_FAILED: "downloading from the source failed",
    Reason.METADATA_FAILED: "reading metadata from the source failed",
    Reason.RATE_LIMITED: "the source rate limited the producer",
    Reason.AUTH_FAILED: "the source rejected the producer's credentials",
    Reason.REMOTE_HTTP_ERROR: "the source answered with an HTTP error",
    Reason.DELIVERY_FAILED: "handing the result to the delivery platform failed",
    Reason.TELEPOST_REJECTED: "the delivery platform rejected the result",
    Reason.TELEGRAM_FAILED: "handing the result to the delivery platform failed",
    Reason.NETWORK_ERROR: "a network error interrupted the source",
    Reason.EXECUTION_TIMEOUT: "the job exceeded its deadline",
    Reason.CONFIGURATION_ERROR: "the producer is misconfigured for this job",
    Reason.INTERNAL_ERROR: "internal error",
    Reason.QUEUED_TOO_LONG: "the job was queued too long and never started",
    Reason.STALLED_NO_HEARTBEAT: "the job stopped sending heartbeats",
    Reason.DELIVERY_ABANDONED: "the delivery had no retry left",
    Reason.CANCELLED_BY_CONSUMER: "the job was cancelled by the consumer",
}


def parse_reason(value: str | None) -> Reason | None:
    """A stored reason string as a Reason; None when absent or unknown (maps to internal_error)."""
    if not value:
        return None
    try:
        return Reason(value)
    except ValueError:
        return None


def code_for_reason(reason: str | None) -> ErrorCode:
    known = parse_reason(reason)
    return REASON_TO_CODE[known] if known is not None else ErrorCode.INTERNAL_ERROR


class ProtocolError(JobstreamError):
    """A request error answered as `{"error": {...}}` with the HTTP status of its kind (and, for
    a retryable refusal, the seconds to wait as `Retry-After`)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        kind: ErrorKind | None = None,
        detail: dict[str, Any] | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind if kind is not None else DEFAULT_KIND.get(code, ErrorKind.INVALID)
        self.detail = detail
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message,
            "retryable": self.code.retryable,
        }
        if self.detail is not None:
            error["detail"] = self.detail
        return {"error": error}


def invalid_params(
    message: str, *, kind: ErrorKind = ErrorKind.INVALID, detail: dict[str, Any] | None = None
) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_PARAMS, message, kind=kind, detail=detail)


# What a client should wait before repeating a request refused for a transient cause.
BUSY_RETRY_AFTER_S: Final = 2


def resource_busy() -> ProtocolError:
    """A transient cause (throttling, a lost race, a dependency's server error) outlasted the
    retries: nothing is wrong with the request, and the same request may succeed later."""
    return ProtocolError(
        ErrorCode.RESOURCE_BUSY,
        "the service is busy; retry the request later",
        detail={"reason": "dependency_busy"},
        retry_after_s=BUSY_RETRY_AFTER_S,
    )


def quota_exceeded(quota: str, limit: int, retry_after_s: int) -> ProtocolError:
    """The tenant is at one of its quotas (`max_open_jobs`, `admissions_per_minute`): nothing
    was admitted, and the same request may be after `retry_after_s`."""
    return ProtocolError(
        ErrorCode.QUOTA_EXCEEDED,
        f"the tenant is at its {quota} quota ({limit}); retry the request later",
        detail={"reason": "quota_exceeded", "quota": quota, "limit": limit},
        retry_after_s=retry_after_s,
    )
