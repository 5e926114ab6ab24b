"""Which AWS failures are transient (DynamoDB's and SQS's own vocabulary), and the retrying
client: bounded, jittered, token-keeping, never retrying a refusal."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from jobstream import observability
from jobstream.aws import ENDPOINT_VARIABLE, retrying_client
from jobstream.deadline import ANSWER_MARGIN_MS, invocation
from jobstream.retries import (
    OutOfTimeError,
    RetryingClient,
    RetryPolicy,
    after_lost_answer,
    client_config,
    transient,
)
from tests.support.slow_peer import slow_peer


def error(code: str, status: int = 400, reasons: list[str] | None = None) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": "m"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": reason} for reason in reasons]
    return ClientError(response, "Operation")


CANCELLED = "TransactionCanceledException"


@pytest.mark.parametrize(
    ("failure", "code", "ambiguous"),
    [
        (
            error("ProvisionedThroughputExceededException"),
            "ProvisionedThroughputExceededException",
            False,
        ),
        (error("ThrottlingException"), "ThrottlingException", False),
        (error("RequestLimitExceeded"), "RequestLimitExceeded", False),
        (error("TransactionConflictException"), "TransactionConflictException", False),
        (error("TransactionInProgressException"), "TransactionInProgressException", True),
        (error("InternalServerError", 500), "InternalServerError", True),
        (error(CANCELLED, reasons=["None", "TransactionConflict"]), "TransactionConflict", False),
        (error(CANCELLED, reasons=["ThrottlingError", "None"]), "ThrottlingError", False),
        (
            error(CANCELLED, reasons=["ProvisionedThroughputExceeded"]),
            "ProvisionedThroughputExceeded",
            False,
        ),
        # SQS, plain and qualified.
        (error("RequestThrottled"), "RequestThrottled", False),
        (error("AWS.SimpleQueueService.RequestThrottled"), "RequestThrottled", False),
        (error("InternalError", 500), "InternalError", True),
        (error("ServiceUnavailable", 503), "ServiceUnavailable", True),
        # An unknown code with a server status, or 429.
        (error("SomethingNew", 502), "SomethingNew", True),
        (error("", 429), "HTTP429", False),
        (EndpointConnectionError(endpoint_url="https://x"), "EndpointConnectionError", True),
        (ConnectTimeoutError(endpoint_url="https://x"), "ConnectTimeoutError", True),
        (ReadTimeoutError(endpoint_url="https://x"), "ReadTimeoutError", True),
        # Nothing was sent: the invocation had no time left for an attempt.
        (OutOfTimeError("no time"), "InvocationDeadline", False),
    ],
)
def test_transient_failures(failure: Exception, code: str, *, ambiguous: bool) -> None:
    found = transient(failure)
    assert found is not None
    assert found.code == code
    assert found.ambiguous is ambiguous


@pytest.mark.parametrize(
    "failure",
    [
        # Another writer won: a retry is refused too, and the caller must re-read instead.
        error("ConditionalCheckFailedException"),
        error(CANCELLED, reasons=["ConditionalCheckFailed", "None"]),
        error(CANCELLED, reasons=["ConditionalCheckFailed", "TransactionConflict"]),
        error(CANCELLED, reasons=["None", "ValidationError"]),
        error(CANCELLED, reasons=["TransactionConflict", "ItemCollectionSizeLimitExceeded"]),
        error(CANCELLED, reasons=[]),
        error(CANCELLED),
        error("ValidationException"),
        error("ResourceNotFoundException"),
        error("AccessDeniedException"),
        error("IdempotentParameterMismatchException"),
        ValueError("a bug"),
    ],
)
def test_refusals_and_bugs_are_not_transient(failure: Exception) -> None:
    assert transient(failure) is None


def test_botocore_makes_one_attempt_of_a_known_longest_time() -> None:
    """Retries are RetryingClient's alone: botocore's would multiply a hung connection's read
    timeout (3 x 5 s outlasted a 10 s function). One attempt takes at most the policy's
    `attempt_ms`, which every time check counts on."""
    config = client_config()
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}
    assert (config.connect_timeout + config.read_timeout) * 1000 == RetryPolicy().attempt_ms
    # With one hung attempt after its budget, a call still ends inside a 10 s HTTP function.
    assert RetryPolicy().budget_ms + RetryPolicy().attempt_ms < 10_000 - ANSWER_MARGIN_MS


def test_the_service_clients_are_retrying_clients() -> None:
    from jobstream.queue import sqs_client
    from jobstream.store.client import dynamodb_client

    for client in (dynamodb_client(), sqs_client()):
        assert isinstance(client, RetryingClient)
        assert client.meta.config.retries["total_max_attempts"] == 1


class FakeClient:
    """Answers each call with the next scripted outcome (an exception or a value)."""

    def __init__(self, *script: Any) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.meta = "meta"

    def _answer(self, **request: Any) -> Any:
        self.requests.append(dict(request))
        outcome = self.script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def update_item(self, **request: Any) -> Any:
        return self._answer(**request)

    def transact_write_items(self, **request: Any) -> Any:
        return self._answer(**request)


def policy(waits: list[float], **overrides: Any) -> RetryPolicy:
    return RetryPolicy(sleep=waits.append, monotonic=lambda: 0.0, rand=lambda: 0.5, **overrides)


def test_a_transient_failure_is_retried_until_it_passes() -> None:
    waits: list[float] = []
    fake = FakeClient(error("ThrottlingException"), error("InternalServerError", 500), {"ok": 1})
    client = RetryingClient(fake, "dynamodb", policy(waits))
    assert client.update_item(Key={"k": 1}) == {"ok": 1}
    assert len(fake.requests) == 3
    # Equal jitter: half the cap and more, doubling per retry (50 ms base).
    assert waits == [0.038, 0.075]


def test_retries_are_bounded_by_attempts() -> None:
    waits: list[float] = []
    throttled = error("ProvisionedThroughputExceededException")
    fake = FakeClient(*[throttled] * 10)
    client = RetryingClient(fake, "dynamodb", policy(waits, attempts=4))
    with pytest.raises(ClientError) as raised:
        client.update_item()
    assert raised.value is throttled
    assert len(fake.requests) == 4
    assert len(waits) == 3


def test_retries_are_bounded_by_time() -> None:
    waits: list[float] = []
    clock = iter([0.0, 0.5, 3.9, 99.0])
    fake = FakeClient(*[error("ThrottlingException")] * 10)
    client = RetryingClient(
        fake,
        "dynamodb",
        RetryPolicy(sleep=waits.append, monotonic=lambda: next(clock), rand=lambda: 0.5),
    )
    with pytest.raises(ClientError):
        client.update_item()
    # Started at 0; at 3.9 s a 150 ms wait would pass the 4 s budget: no third retry.
    assert len(fake.requests) == 3


def test_waits_are_jittered_and_capped() -> None:
    rolls = iter([0.0, 0.999] * 5)
    waits: list[float] = []
    fake = FakeClient(*[error("ThrottlingException")] * 9)
    client = RetryingClient(
        fake,
        "dynamodb",
        RetryPolicy(
            attempts=9,
            max_ms=200,
            sleep=waits.append,
            monotonic=lambda: 0.0,
            rand=lambda: next(rolls),
        ),
    )
    with pytest.raises(ClientError):
        client.update_item()
    caps = [0.05, 0.1, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
    assert all(cap / 2 <= wait < cap for wait, cap in zip(waits, caps, strict=True))
    assert waits[0] != waits[1] / 2  # the draws differ: not a fixed schedule


def test_a_refusal_is_raised_at_once() -> None:
    waits: list[float] = []
    refused = error(CANCELLED, reasons=["ConditionalCheckFailed", "None"])
    fake = FakeClient(refused, {"never": True})
    with pytest.raises(ClientError) as raised:
        RetryingClient(fake, "dynamodb", policy(waits)).transact_write_items(TransactItems=[])
    assert raised.value is refused
    assert waits == []
    assert not after_lost_answer(raised.value)


def test_a_transaction_keeps_its_token_only_while_it_may_have_been_applied() -> None:
    """DynamoDB answers a repeated token with the first outcome: after a lost answer the retry
    must carry the same token (a second application is impossible); after a refusal (nothing
    applied) a new one, so a cancellation is not replayed."""
    fake = FakeClient(
        error("InternalServerError", 500),
        error(CANCELLED, reasons=["TransactionConflict"]),
        error("ThrottlingException"),
        {"done": True},
    )
    client = RetryingClient(fake, "dynamodb", policy([]))
    assert client.transact_write_items(TransactItems=[{"Put": {}}]) == {"done": True}
    tokens = [request["ClientRequestToken"] for request in fake.requests]
    assert tokens[0] == tokens[1]  # after the server error: maybe applied
    assert len(set(tokens[1:])) == 3  # after each refusal: a new request


@pytest.mark.parametrize("operation", ["update_item", "transact_write_items"])
def test_a_built_request_is_built_again_after_each_failure_that_applied_nothing(
    operation: str,
) -> None:
    """`call_built`: each attempt sends a request built after the wait (a feed stamp as fresh as
    the attempt); a transaction after a failure that may have been applied, the same request
    again (its token names one request)."""
    clock = iter(range(1, 10))
    fake = FakeClient(
        error("ThrottlingException"),
        error("InternalServerError", 500),
        error("TransactionConflictException"),
        {"done": True},
    )
    client = RetryingClient(fake, "dynamodb", policy([]))
    assert client.call_built(operation, lambda: {"Stamp": next(clock)}) == {"done": True}
    stamps = [request["Stamp"] for request in fake.requests]
    if operation == "transact_write_items":
        assert stamps == [1, 2, 2, 3]
        tokens = [request["ClientRequestToken"] for request in fake.requests]
        assert tokens[1] == tokens[2]
        assert len(set(tokens)) == 3
    else:
        assert stamps == [1, 2, 3, 4]


def test_a_refusal_after_a_lost_answer_says_so() -> None:
    """The first try may have been applied: the condition that refuses the retry may be its
    own write, which the store and services check for."""
    refused = error(CANCELLED, reasons=["ConditionalCheckFailed"])
    fake = FakeClient(error("InternalServerError", 500), refused)
    with pytest.raises(ClientError) as raised:
        RetryingClient(fake, "dynamodb", policy([])).transact_write_items(TransactItems=[])
    assert after_lost_answer(raised.value)


def test_retries_and_give_ups_are_counted_by_code() -> None:
    observability.emf_documents()
    fake = FakeClient(error("ThrottlingException"), *[error("RequestThrottled")] * 2)
    with pytest.raises(ClientError):
        RetryingClient(fake, "sqs", policy([], attempts=3)).update_item()
    counts = {
        (name, document.get("code")): document[name]
        for document in observability.emf_documents()
        for name in ("aws_retries", "aws_retries_exhausted")
        if name in document
    }
    assert counts == {
        ("aws_retries", "ThrottlingException"): 1,
        ("aws_retries", "RequestThrottled"): 1,
        ("aws_retries_exhausted", "RequestThrottled"): 1,
    }


def test_everything_but_operations_is_the_wrapped_clients_own() -> None:
    fake = FakeClient()
    assert RetryingClient(fake, "dynamodb").meta == "meta"


# ------------------------------------------------------------ the invocation's remaining time


def remaining(ms: int) -> Any:
    """An invocation with `ms` left for its work (Lambda's remaining time, less the answer)."""
    return invocation(lambda: ms + ANSWER_MARGIN_MS)


def test_no_attempt_starts_that_could_end_past_the_invocation() -> None:
    fake = FakeClient({"never": True})
    client = RetryingClient(fake, "dynamodb", policy([], attempt_ms=3_000))
    with remaining(2_000), pytest.raises(OutOfTimeError) as raised:
        client.update_item()
    assert fake.requests == []
    assert transient(raised.value) is not None  # an HTTP route answers 503 resource_busy
    with remaining(3_500):
        assert client.update_item() == {"never": True}


def test_no_retry_starts_that_could_end_past_the_invocation() -> None:
    """The first attempt fits; its retry (after a 375 ms wait) would not: the failure is raised
    at once, though the policy's budget and attempts would allow more."""
    throttled = error("ThrottlingException")
    fake = FakeClient(throttled, {"late": True})
    client = RetryingClient(fake, "dynamodb", policy([], attempt_ms=1_000, base_ms=500))
    with remaining(1_300), pytest.raises(ClientError) as raised:
        client.update_item()
    assert raised.value is throttled
    assert len(fake.requests) == 1


def test_a_hung_endpoint_is_given_up_within_the_invocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A DynamoDB endpoint that accepts the connection and never answers (a real socket): the
    call fails, transiently, within the invocation's remaining time (4 s here), with botocore's
    real timeouts; it took 15 s and more (3 attempts of a 5 s read) in a 10 s function."""
    bound_s = 4.0
    with slow_peer(hold_s=bound_s + 6) as hung:
        monkeypatch.setenv(ENDPOINT_VARIABLE, hung.base_url)
        client = retrying_client("dynamodb")
        outcome: list[BaseException] = []

        def call() -> None:
            try:
                with remaining(int(bound_s * 1000)):
                    client.get_item(TableName="t", Key={"pk": {"S": "x"}})
            except Exception as failure:  # noqa: BLE001 - what it raised is the point
                outcome.append(failure)

        worker = threading.Thread(target=call, daemon=True)
        started = time.monotonic()
        worker.start()
        worker.join(timeout=bound_s + 2)
        assert not worker.is_alive(), "the call outlived the invocation"
        assert hung.connections >= 1  # the endpoint was reached (no moto here)
    assert time.monotonic() - started < bound_s + 2
    (failure,) = outcome
    assert transient(failure) is not None
