"""What a call can fail with: the producer's error envelope (typed by status), the network, or
an answer that is not a protocol document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobstream_client.models import ErrorInfo

# Answers without an envelope (a gateway's own throttling or outage page) are judged by status.
TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class JobstreamError(Exception):
    """Base of every error this package raises."""


class TransportError(JobstreamError):
    """Nothing usable came back: refused, unresolvable, reset, timed out. Safe to retry for
    idempotent calls (every protocol call is: submit is idempotent by its key)."""

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause

    @property
    def refused(self) -> bool:
        """The connection was refused: nothing listens at the address (e.g. a stopped server),
        as opposed to a timeout, a reset or a name that does not resolve."""
        reason = getattr(self.cause, "reason", self.cause)  # URLError wraps the socket's error
        return isinstance(reason, ConnectionRefusedError)


class ResponseError(JobstreamError):
    """A 2xx answer that is not the protocol document the call expects (not JSON, wrong shape,
    an unexpected status such as 201 for a submit)."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ApiError(JobstreamError):
    """The producer answered 3xx/4xx/5xx. `error` is the protocol envelope when there is one;
    `retryable` is the envelope's own flag (consumers believe it), else judged by status."""

    def __init__(
        self,
        status: int,
        error: ErrorInfo | None,
        *,
        body: Any = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.status = status
        self.error = error
        self.body = body
        self.retry_after_s = retry_after_s
        super().__init__(f"{self.code}: {self.message} (HTTP {status})")

    @property
    def code(self) -> str:
        """The protocol code, or `http_<status>` for an answer without an envelope."""
        return self.error.code if self.error is not None else f"http_{self.status}"

    @property
    def message(self) -> str:
        if self.error is not None and self.error.message:
            return self.error.message
        plain = self.body.get("message") if isinstance(self.body, Mapping) else None
        return str(plain) if plain else "no error envelope in the answer"

    @property
    def retryable(self) -> bool:
        if self.error is not None:
            return self.error.retryable
        return self.status in TRANSIENT_STATUSES

    @property
    def detail(self) -> Mapping[str, Any]:
        return self.error.detail if self.error is not None and self.error.detail else {}


class BadRequestError(ApiError):
    """400/413/415/422: the request itself is wrong (`invalid_params`,
    `unsupported_protocol_version`); retrying the same request cannot help."""


class AuthError(ApiError):
    """401/403: the bearer token is missing, wrong or not allowed here."""


class NotFoundError(ApiError):
    """404: no such job for this token (another tenant's job is a 404 too), or no such target."""


class ConflictError(ApiError):
    """409: e.g. an ambiguous target selector."""


class IdempotencyConflictError(ConflictError):
    """409 `idempotency_conflict`: the key already names a job submitted with other params."""


class ServerError(ApiError):
    """5xx. Retried automatically when the envelope says `retryable`."""


def api_error(status: int, body: Any, *, retry_after_s: float | None = None) -> ApiError:
    """The typed error for a non-2xx answer; `body` is the decoded JSON (or None)."""
    envelope = body.get("error") if isinstance(body, Mapping) else None
    error = ErrorInfo.from_envelope(envelope)
    kind: type[ApiError]
    if status == 409:
        code = error.code if error is not None else None
        kind = IdempotencyConflictError if code == "idempotency_conflict" else ConflictError
    elif status in {401, 403}:
        kind = AuthError
    elif status == 404:
        kind = NotFoundError
    elif status >= 500:
        kind = ServerError
    elif 400 <= status < 500 and status not in TRANSIENT_STATUSES:
        kind = BadRequestError
    else:
        kind = ApiError
    return kind(status, error, body=body, retry_after_s=retry_after_s)
