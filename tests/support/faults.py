"""Failures injected at the boto3 boundary of the service's own DynamoDB and SQS clients.

Handlers on the clients' `before-call` / `after-call` events run outside botocore's own retry
loop, so an injected error is one that outlasted botocore's retries. `before`: the call is
refused, nothing is applied. `after`: the call was applied and its answer is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.queue import sqs_client
from jobstream.store.client import dynamodb_client

# The transient faults AWS raises, by kind: what DynamoDB and SQS answer for each.
KINDS: Final = ("conflict", "throughput", "throttling", "internal")
# A refusal no retry cures (what AWS answers a request it will not apply: an item too large, a
# number it cannot store, a parameter out of range): never retried, nothing applied.
REFUSAL: Final = "validation"
_DYNAMODB: Final = {
    "throughput": ("ProvisionedThroughputExceededException", 400),
    "throttling": ("ThrottlingException", 400),
    "internal": ("InternalServerError", 500),
    REFUSAL: ("ValidationException", 400),
}
# SQS has no transactions: its "conflict" is its other transient answer, 503.
_SQS: Final = {
    "conflict": ("ServiceUnavailable", 503),
    "throughput": ("RequestThrottled", 400),
    "throttling": ("ThrottlingException", 400),
    "internal": ("InternalError", 500),
    REFUSAL: ("InvalidParameterValue", 400),
}


def aws_error(kind: str, service: str, operation: str) -> ClientError:
    """The error `service` answers `operation` with for a fault of `kind`."""
    response: dict[str, Any]
    if service == "dynamodb" and kind == "conflict":
        if operation == "TransactWriteItems":
            # The transaction raced another write to its second item (DynamoDB's wording).
            reasons = [
                {"Code": "None"},
                {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
            ]
            response = {
                "Error": {
                    "Code": "TransactionCanceledException",
                    "Message": "Transaction cancelled, please refer cancellation reasons for "
                    "specific reasons [None, TransactionConflict]",
                },
                "CancellationReasons": reasons,
            }
            status = 400
        else:
            response = {
                "Error": {
                    "Code": "TransactionConflictException",
                    "Message": "Operation was rejected because there is an ongoing transaction "
                    "for the item.",
                }
            }
            status = 400
    else:
        code, status = (_DYNAMODB if service == "dynamodb" else _SQS)[kind]
        response = {"Error": {"Code": code, "Message": f"injected {kind}"}}
    response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return ClientError(response, operation)


@dataclass
class Faults:
    """Which calls fail. `at=None`: every call fails once (its first try; the retry passes).
    Otherwise calls number `at` .. `at + times - 1` fail (one call and all its retries).
    Successive failures take their kind from `kinds` in turn.

    Calls may come from several threads at once (the store reads shards in parallel): the
    counts are kept under a lock, and whether a call is failing (and whether the thread's last
    call failed: its retry then passes) per thread, since a call and its retries share one."""

    kinds: tuple[str, ...]
    mode: str = "before"
    at: int | None = None
    times: int = 1
    # Only calls whose request body holds this text count (and fail); None: every call.
    matching: str | None = None
    calls: int = 0
    fired: int = 0
    operations: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _thread: threading.local = field(default_factory=threading.local, repr=False)

    def _decide(self) -> tuple[bool, bool]:
        """Whether this call fails, and whether it is the first failing call of its run."""
        with self._lock:
            self.calls += 1
            if self.at is None:
                fail = not getattr(self._thread, "last_failed", False)
            else:
                fail = self.at <= self.calls < self.at + self.times
            first_of_run = self.at is None or self.calls == self.at
        self._thread.last_failed = fail
        return fail, first_of_run

    def before(self, event_name: str, model: Any, params: dict[str, Any], **_: Any) -> None:
        service = event_name.split(".")[1]
        with self._lock:
            self.operations.append(f"{service}.{model.name}")
        body = params.get("body", b"")
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        if self.matching is not None and self.matching not in text:
            self._thread.failing = (False, False)
            return
        failing, first_of_run = self._thread.failing = self._decide()
        # "after" loses the answer of the first failing call only; its retries are refused.
        if failing and not (self.mode == "after" and first_of_run):
            raise self._error(service, model.name)

    def after(self, event_name: str, model: Any, **_: Any) -> None:
        failing, first_of_run = getattr(self._thread, "failing", (False, False))
        if failing and self.mode == "after" and first_of_run:
            raise self._error(event_name.split(".")[1], model.name)

    def _error(self, service: str, operation: str) -> ClientError:
        with self._lock:
            kind = self.kinds[self.fired % len(self.kinds)]
            self.fired += 1
        return aws_error(kind, service, operation)


@contextmanager
def injected(faults: Any) -> Iterator[Any]:
    """`faults.before` / `faults.after` on every call of the service's DynamoDB and SQS clients."""
    clients = [dynamodb_client(), sqs_client()]
    for client in clients:
        service = client.meta.service_model.endpoint_prefix
        client.meta.events.register(f"before-call.{service}", faults.before, "faults-before")
        client.meta.events.register(f"after-call.{service}", faults.after, "faults-after")
    try:
        yield faults
    finally:
        for client in clients:
            service = client.meta.service_model.endpoint_prefix
            client.meta.events.unregister(f"before-call.{service}", unique_id="faults-before")
            client.meta.events.unregister(f"after-call.{service}", unique_id="faults-after")
