"""Transient AWS failures: which ones another try may cure, and retrying them, bounded and jittered.

Every call of the clients built here is retried here, and only here: throttling, 5xx answers,
connection errors and timeouts, and what botocore would not retry: a transaction DynamoDB
cancelled because it raced another write to one of its items (`TransactionCanceledException`,
reason `TransactionConflict`), a single-item write refused during another transaction
(`TransactionConflictException`). A bounded number of times with jittered backoff, so one lost
race or one throttled second never fails an operation. What still fails is raised unchanged;
`transient()` tells the caller it may answer "retry later".

Time is bounded as well as tries. botocore makes one attempt per call (its own retries would
multiply the read timeout: 3 attempts of a hung connection took 15 s in a 10 s function), with
short timeouts, so one attempt takes at most `RetryPolicy.attempt_ms`; no retry starts after the
policy's budget, and no attempt starts, not even the first, that could end past the invocation's
deadline (`deadline.invocation_deadline()`): the caller gets a transient failure in time to
answer (`OutOfTimeError` when nothing was tried).

A request made by `RetryingClient.call_built` is built again for each attempt, so a value taken
at send time (the feed's stamp, store/jobs.py) is one attempt old when the write lands, never the
whole budget's; a transaction's retry after a failure that applied nothing has a token of its
own, after one that may have been applied the same request and token again.

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
from jobstream.deadline import invocation_deadline
from jobstream.errors import JobstreamError

if TYPE_CHECKING:
    from botocore.config import Config

logger = logging.getLogger(__name__)

# Error codes after which the same request may succeed. DynamoDB: throttling (table, index or
# account), a write refused during another transaction, a transaction still in progress, a
# server error. SQS: its throttling and server errors. Any service: the generic throttling and
# timeout codes botocore's own retries knew (they are ours alone now).
TRANSIENT_CODES: Final = frozenset(
    {
        "TooManyRequestsException",
        "ThrottledException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
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
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
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
# One attempt's timeouts (botocore's, per connect and per read): DynamoDB and SQS answer in
# milliseconds, so a connection silent this long is hung and the attempt is given up.
CONNECT_TIMEOUT_S: Final = 1
READ_TIMEOUT_S: Final = 2
OUT_OF_TIME: Final = "InvocationDeadline"


class OutOfTimeError(JobstreamError):
    """No attempt was made: the invocation had less time left than one attempt may take."""


@dataclass(frozen=True, slots=True)
class Transient:
    """A failure another try may cure: its code, and whether the request may have been applied."""

    code: str
    ambiguous: bool


def transient(error: BaseException) -> Transient | None:
    """What makes `error` transient, or None when retrying cannot help (a refusal or a bug)."""
    if isinstance(error, OutOfTimeError):
        # Nothing was sent; a later invocation has the time.
        return Transient(OUT_OF_TIME, ambiguous=False)
    if isinstance(error, BotocoreConnectionError | HTTPClientError):
        # Sent or not, unknown: a connection dropped or a read timed out.
        return Transient(type(error).__name__, ambiguous=True)
    if isinstance(error, ClientError):
        return _transient_answer(error)
    return None


def _transient_answer(error: ClientError) -> Transient | None:
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
    """At most `attempts` calls, no new one after `budget_ms`, none that could end past the
    invocation's deadline (`attempt_ms`: what one attempt may take, a hung connection's
    timeouts); waits of equal jitter between them (a uniform draw in [cap/2, cap), cap = base_ms
    doubling per retry, at most max_ms)."""

    attempts: int = 8
    base_ms: int = 50
    max_ms: int = 1_000
    # With one hung attempt after it, a call ends within 7 s: inside the API functions' 10 s.
    budget_ms: int = 4_000
    attempt_ms: int = (CONNECT_TIMEOUT_S + READ_TIMEOUT_S) * 1000
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random

    def delay_ms(self, retry: int) -> int:
        return retry_delay_ms(retry, base_ms=self.base_ms, max_ms=self.max_ms, rand=self.rand)

    def in_time(self, delay_ms: int = 0) -> bool:
        """Whether an attempt after `delay_ms` would end by the invocation's deadline (always,
        outside an invocation)."""
        deadline = invocation_deadline()
        return deadline is None or delay_ms + self.attempt_ms <= deadline.remaining_ms()


_policy = RetryPolicy()


def default_policy() -> RetryPolicy:
    return _policy


def set_default_policy(policy: RetryPolicy) -> RetryPolicy:
    """Use `policy` for every client call from now on (tests inject a sleep); returns the old."""
    global _policy  # one process-wide policy, like the clients themselves
    previous, _policy = _policy, policy
    return previous


def client_config() -> Config:
    """One botocore attempt per call (RetryingClient retries, within the time it has) and
    timeouts far below the functions' own, so a hung connection is retried, not waited out."""
    from botocore.config import Config  # noqa: PLC0415 - deferred with boto3 (cold start)

    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
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

    def call_built(self, operation: str, build: Callable[[], Mapping[str, Any]]) -> Any:
        """`operation` with its request built by `build` just before each attempt, so a value
        taken at send time (a feed stamp) is as fresh as that attempt, not as old as the whole
        retry budget. Except a transaction after a failure that may have been applied: it is
        sent again unchanged (its token names one request)."""
        return self._call(operation, getattr(self._client, operation), build=build)

    def _call(
        self,
        operation: str,
        method: Callable[..., Any],
        /,
        build: Callable[[], Mapping[str, Any]] | None = None,
        **given: Any,
    ) -> Any:
        policy = self._policy or default_policy()
        transaction = operation == "transact_write_items"
        request = dict(given if build is None else build())
        if transaction:
            # DynamoDB answers a repeated token (within 10 minutes) with the first outcome
            # instead of applying the transaction twice: a retry after a lost answer succeeds.
            request.setdefault("ClientRequestToken", uuid.uuid4().hex)
        started = policy.monotonic()
        retry = 0
        answer_lost = False
        self._check_time(policy, operation)
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
                if not self._retry_now(
                    policy, operation, failure, retry=retry, delay_ms=delay_ms, started=started
                ):
                    raise
                policy.sleep(delay_ms / 1000)
                # A transaction that may have been applied goes again unchanged: its token
                # names one request (DynamoDB refuses it with other parameters).
                if not (transaction and failure.ambiguous):
                    request = self._next_request(request, build, transaction=transaction)

    @staticmethod
    def _next_request(
        sent: dict[str, Any],
        build: Callable[[], Mapping[str, Any]] | None,
        *,
        transaction: bool,
    ) -> dict[str, Any]:
        """The next attempt's request: built again (`call_built`) once the wait is over, and a
        transaction's (which applied nothing) with a token of its own (a cancelled token may be
        answered with its cancellation again). A single write built again after a lost answer
        is refused by its condition if the earlier try was applied (`after_lost_answer`)."""
        request = sent if build is None else dict(build())
        if transaction:
            request["ClientRequestToken"] = uuid.uuid4().hex
        return request

    def _check_time(self, policy: RetryPolicy, operation: str) -> None:
        if not policy.in_time():
            observability.count("aws_retries_exhausted", dimension=OUT_OF_TIME)
            raise OutOfTimeError(f"{self._service} {operation}: no time left for an attempt")

    def _retry_now(
        self,
        policy: RetryPolicy,
        operation: str,
        failure: Transient,
        *,
        retry: int,
        delay_ms: int,
        started: float,
    ) -> bool:
        """Whether retry number `retry` may run after `delay_ms` (counted and logged)."""
        elapsed_ms = (policy.monotonic() - started) * 1000
        if (
            retry >= policy.attempts
            or elapsed_ms + delay_ms > policy.budget_ms
            or not policy.in_time(delay_ms)
        ):
            observability.count("aws_retries_exhausted", dimension=failure.code)
            logger.warning(
                "%s %s still failing after %d attempts (%s); giving up",
                self._service,
                operation,
                retry,
                failure.code,
            )
            return False
        observability.count("aws_retries", dimension=failure.code)
        logger.info(
            "%s %s failed (%s); retry %d in %d ms",
            self._service,
            operation,
            failure.code,
            retry,
            delay_ms,
        )
        return True
