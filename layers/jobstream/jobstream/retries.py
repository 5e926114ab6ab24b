"""Transient AWS failures: which ones another try may cure, and retrying them, bounded and jittered.

botocore (its `standard` mode, set explicitly on every client) retries throttling, 5xx answers and
connection errors a few times inside one call. It does not retry a transaction DynamoDB cancelled
because it raced another write to one of its items (`TransactionCanceledException`, reason
`TransactionConflict`), nor a single-item write refused during another transaction
(`TransactionConflictException`); and throttling may outlast its attempts. Every call of the
clients built here is retried around botocore for all of these, a bounded number of times with
jittered backoff, so one lost race or one throttled second never fails an operation. What still
fails is raised unchanged; `transient()` tells the caller it may answer "retry later".

A cancellation because a condition failed is never transient: another writer won, and the caller
re-reads (the store turns it into "stale" or "already exists").
"""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from jobstream import observability
from jobstream.backoff import retry_delay_ms

if TYPE_CHECKING:
    from botocore.config import Config

logger = logging.getLogger("jobstream.aws")

# Error codes after which the same request may succeed. DynamoDB: throttling (table, index or
# account), a write refused during another transaction, a transaction still in progress, a
# server error. SQS: its throttling and server errors.
TRANSIENT_CODES: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
        "RequestThrottled",
        "Throttling",
        "KmsThrottled",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
    }
)
# Failures after which the request may have been applied: only its answer was lost.
AMBIGUOUS_CODES: Final = frozenset(
    {
        "InternalServerError",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "TransactionInProgressException",
    }
)
# Cancellation reasons of an item that another try may write (DynamoDB's vocabulary); any
# other reason (ConditionalCheckFailed, ValidationError, ...) makes the cancellation final.
TRANSIENT_CANCELLATIONS: Final = frozenset(
    {"TransactionConflict", "ProvisionedThroughputExceeded", "ThrottlingError"}
)
TRANSACTION_CANCELLED: Final = "TransactionCanceledException"
_SERVER_STATUSES: Final = frozenset({500, 502, 503, 504})
_ANSWER_LOST: Final = "jobstream_after_lost_answer"
_NOT_CALLS: Final = frozenset({"meta", "exceptions", "get_paginator", "get_waiter", "can_paginate"})


@dataclass(frozen=True, slots=True)
class Transient:
    """A failure another try may cure: its code, and whether the request may have been applied."""

    code: str
    ambiguous: bool


def transient(error: BaseException) -> Transient | None:
    """What makes `error` transient, or None when retrying cannot help (a refusal or a bug)."""
    if isinstance(error, BotocoreConnectionError | HTTPClientError):
        # Sent or not, unknown: a connection dropped or a read timed out.
        return Transient(type(error).__name__, ambiguous=True)
    if not isinstance(error, ClientError):
        return None
    # SQS may qualify its codes (AWS.SimpleQueueService.RequestThrottled): the last part decides.
    code = str(error.response.get("Error", {}).get("Code", "")).rsplit(".", 1)[-1]
    if code == TRANSACTION_CANCELLED:
        reasons: Sequence[Mapping[str, Any]] = error.response.get("CancellationReasons") or []
        codes = {str(reason.get("Code") or "None") for reason in reasons}
        retryable = codes & TRANSIENT_CANCELLATIONS
        # Any other reason (a failed condition above all) decides: another try is refused too.
        if not retryable or codes - TRANSIENT_CANCELLATIONS - {"None"}:
            return None
        return Transient(min(retryable), ambiguous=False)
    if code in TRANSIENT_CODES:
        return Transient(code, ambiguous=code in AMBIGUOUS_CODES)
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if status in _SERVER_STATUSES:
        return Transient(code or f"HTTP{status}", ambiguous=True)
    if status == 429:
        return Transient(code or "HTTP429", ambiguous=False)
    return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most `attempts` calls, no new one after `budget_ms`; waits of equal jitter between them
    (a uniform draw in [cap/2, cap), cap = base_ms doubling per retry, at most max_ms)."""

    attempts: int = 5
    base_ms: int = 50
    max_ms: int = 1_000
    # Keeps an HTTP answer well inside the API functions' 10 s timeout, even when each call
    # spends botocore's own retries (about 3 s) first.
    budget_ms: int = 4_000
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random

    def delay_ms(self, retry: int) -> int:
        return retry_delay_ms(retry, base_ms=self.base_ms, max_ms=self.max_ms, rand=self.rand)


_policy = RetryPolicy()


def default_policy() -> RetryPolicy:
    return _policy


def set_default_policy(policy: RetryPolicy) -> RetryPolicy:
    """Use `policy` for every client call from now on (tests inject a sleep); returns the old."""
    global _policy  # one process-wide policy, like the clients themselves
    previous, _policy = _policy, policy
    return previous


def client_config() -> Config:
    """botocore's `standard` retry mode (3 attempts: throttling, 5xx, connection errors) and
    timeouts far below the functions' own, so a hung connection is retried, not waited out."""
    from botocore.config import Config  # noqa: PLC0415 - deferred with boto3 (cold start)

    return Config(
        retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=5
    )


def after_lost_answer(error: BaseException) -> bool:
    """Whether `error` refused a retry of a request whose earlier try may have been applied
    (its answer was lost): a failed condition then may be that try's own write."""
    return bool(getattr(error, _ANSWER_LOST, False))


class RetryingClient:
    """A boto3 client whose every operation is retried on a transient failure (module doc).

    Everything else (`meta`, `exceptions`, paginators) is the wrapped client's own, so event
    hooks registered on `meta.events` still see each attempt.
    """

    def __init__(self, client: Any, service: str, policy: RetryPolicy | None = None) -> None:
        self._client = client
        self._service = service
        self._policy = policy

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name in _NOT_CALLS or name.startswith("_") or not callable(attribute):
            return attribute
        return functools.partial(self._call, name, attribute)

    def _call(self, operation: str, method: Callable[..., Any], /, **request: Any) -> Any:
        policy = self._policy or default_policy()
        transaction = operation == "transact_write_items"
        if transaction:
            # DynamoDB answers a repeated token (within 10 minutes) with the first outcome
            # instead of applying the transaction twice: a retry after a lost answer succeeds.
            request.setdefault("ClientRequestToken", uuid.uuid4().hex)
        started = policy.monotonic()
        retry = 0
        answer_lost = False
        while True:
            try:
                return method(**request)
            except Exception as error:
                failure = transient(error)
                if failure is None:
                    if answer_lost:
                        # A refusal now may be this request's own earlier write.
                        setattr(error, _ANSWER_LOST, True)
                    raise
                answer_lost = answer_lost or failure.ambiguous
                retry += 1
                delay_ms = policy.delay_ms(retry)
                elapsed_ms = (policy.monotonic() - started) * 1000
                if retry >= policy.attempts or elapsed_ms + delay_ms > policy.budget_ms:
                    observability.count("aws_retries_exhausted", dimension=failure.code)
                    logger.warning(
                        "%s %s still failing after %d attempts (%s); giving up",
                        self._service,
                        operation,
                        retry,
                        failure.code,
                    )
                    raise
                observability.count("aws_retries", dimension=failure.code)
                logger.info(
                    "%s %s failed (%s); retry %d in %d ms",
                    self._service,
                    operation,
                    failure.code,
                    retry,
                    delay_ms,
                )
                if transaction and not failure.ambiguous:
                    # Nothing was applied: the next try is a new request with a token of its own
                    # (a cancelled token may be answered with its cancellation again).
                    request["ClientRequestToken"] = uuid.uuid4().hex
                policy.sleep(delay_ms / 1000)
