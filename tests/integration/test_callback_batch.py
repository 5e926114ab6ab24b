"""The callbacks function under Lambda's limits (issue 13 item 11): a batch is delivered
concurrently, nothing is claimed without the time for a whole attempt, a consumer's outage is
no invocation error, and the partial batch response names exactly the messages SQS must keep."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

import boto3
import pytest

from jobstream import observability
from jobstream import runtime as runtime_module
from jobstream.deadline import ANSWER_MARGIN_MS
from jobstream.delivery.http import HttpResult
from jobstream.domain import IntentRef
from jobstream.queue import QueueMessage
from jobstream.runtime import Runtime
from jobstream.service import admission
from jobstream.service.callback_batch import (
    OUTCOME_MARGIN_MS,
    BatchFailedError,
    deliver_batch,
)
from jobstream.store.callbacks import CallbackStore
from tests.support.dispatch import dispatch_stream
from tests.support.harness import canonical_task
from tests.support.lambda_events import lambda_context, queue_handler, sqs_record
from tests.support.slow_peer import SLOWLORIS, slow_peer

HOOK = "https://consumer.example.test/hooks"


def submit_many(rt: Runtime, count: int, hook: str = HOOK) -> list[str]:
    ids = []
    for index in range(count):
        status, body = admission.submit(
            rt, "acme", canonical_task(idempotency_key=f"batch-{index}", callback_url=hook), None
        )
        assert status == 202
        ids.append(body["job"]["job_id"])
    return ids


def receive(rt: Runtime, count: int) -> list[QueueMessage]:
    """The callback queue's messages, as the event source mapping hands them to the function."""
    dispatch_stream(rt)
    sqs = boto3.client("sqs")
    found: dict[str, QueueMessage] = {}
    for _ in range(10):
        response = sqs.receive_message(
            QueueUrl=rt.settings.callback_queue_url or "",
            MaxNumberOfMessages=10,
            VisibilityTimeout=60,
            WaitTimeSeconds=0,
        )
        for message in response.get("Messages", []):
            found[message["MessageId"]] = QueueMessage(
                message["MessageId"], message["Body"], message["ReceiptHandle"]
            )
        if len(found) >= count:
            break
    assert len(found) == count
    return list(found.values())


def visible(rt: Runtime) -> int:
    response = boto3.client("sqs").receive_message(
        QueueUrl=rt.settings.callback_queue_url or "", MaxNumberOfMessages=10, WaitTimeSeconds=0
    )
    return len(response.get("Messages", []))


def states(rt: Runtime, job_ids: list[str]) -> list[tuple[str, int]]:
    found = []
    for job_id in job_ids:
        intent = rt.callbacks.get(IntentRef(job_id, 1))
        assert intent is not None
        found.append((intent.state, intent.attempts))
    return found


def failures(response: dict[str, list[dict[str, str]]]) -> set[str]:
    return {item["itemIdentifier"] for item in response["batchItemFailures"]}


def test_a_batch_is_delivered_concurrently(crt: Runtime) -> None:
    """Ten receivers that each wait for all ten: only a concurrent batch gets them together."""
    job_ids = submit_many(crt, 10)
    together = threading.Barrier(10, timeout=10)

    def receiver(_target: Any, _body: bytes, _headers: Any, _timeout: float) -> HttpResult:
        together.wait()
        return HttpResult(204, "", None)

    kept = deliver_batch(replace(crt, poster=receiver), receive(crt, 10), lambda: 30_000)
    assert kept == []
    assert states(crt, job_ids) == [("delivered", 1)] * 10


def test_nothing_is_claimed_without_the_time_for_a_whole_attempt(crt: Runtime) -> None:
    job_ids = submit_many(crt, 3)
    posts: list[bytes] = []

    def receiver(_target: Any, body: bytes, _headers: Any, _timeout: float) -> HttpResult:
        posts.append(body)
        return HttpResult(204, "", None)

    messages = receive(crt, 3)
    assert visible(crt) == 0
    too_little = crt.settings.callback_timeout_ms + OUTCOME_MARGIN_MS - 1
    kept = deliver_batch(replace(crt, poster=receiver), messages, lambda: too_little)
    assert set(kept) == {message.message_id for message in messages}
    assert posts == []
    assert states(crt, job_ids) == [("pending", 0)] * 3
    # Handed back at once (visibility 0), not after the queue's visibility timeout.
    assert visible(crt) == 3


def invoke(messages: list[QueueMessage], remaining_ms: int) -> Any:
    """The callbacks function's handler, invoked as Lambda's SQS integration would."""
    records = [
        sqs_record(m.body, message_id=m.message_id, receipt_handle=m.receipt_handle)
        for m in messages
    ]
    context = lambda_context("callbacks", remaining_ms)
    return queue_handler("CallbackQueue")({"Records": records}, context)


def test_the_handler_reads_the_invocations_remaining_time(crt: Runtime) -> None:
    job_ids = submit_many(crt, 2)
    response = invoke(receive(crt, 2), remaining_ms=1_000)
    assert len(response["batchItemFailures"]) == 2
    assert states(crt, job_ids) == [("pending", 0)] * 2


def test_no_attempt_outlives_the_invocation(crt: Runtime) -> None:
    """A receiver that trickles its answer (real sockets): the POST is cut at its deadline, its
    outcome recorded and its message's backoff set before the function returns, so no thread
    is left running to be frozen with the environment and resumed in a later invocation."""
    fast = replace(crt, settings=crt.settings.model_copy(update={"callback_timeout_ms": 500}))
    # Time to claim the message, and 2 s more than the attempt's timeout before the margin the
    # outcome keeps (the function used to wait that long, then leave the attempt running).
    remaining = 500 + OUTCOME_MARGIN_MS + ANSWER_MARGIN_MS + 2_000
    with slow_peer(trickle=SLOWLORIS) as peer:
        (job_id,) = submit_many(fast, 1, hook=peer.url("/hooks"))
        (message,) = receive(fast, 1)
        kept = deliver_batch(fast, [message], lambda: remaining)
        # The attempt is over: its outcome is recorded, its connection was closed by us.
        assert states(fast, [job_id]) == [("retry_wait", 1)]
        assert peer.went_away()
    assert kept == [message.message_id]
    assert not [thread for thread in threading.enumerate() if thread.name == "http-deadline"]


def test_a_consumer_outage_is_no_invocation_error(
    crt: Runtime, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every message of the batch fails to deliver (503): each comes back after its backoff, a
    warning is logged and counted, and the invocation itself succeeds."""
    job_ids = submit_many(crt, 4)

    def down(_target: Any, _body: bytes, _headers: Any, _timeout: float) -> HttpResult:
        return HttpResult(503, "maintenance", None)

    messages = receive(crt, 4)
    observability.emf_documents()  # drop what earlier tests counted
    flushed: list[dict[str, Any]] = []
    flush = observability.flush
    monkeypatch.setattr(observability, "flush", lambda: flushed.extend(flush()) or flushed)
    monkeypatch.setattr(runtime_module, "runtime", lambda: replace(crt, poster=down))
    with caplog.at_level(logging.WARNING, logger="jobstream"):
        # Through the function's handler: a batch of nothing but failed deliveries.
        response = invoke(messages, remaining_ms=30_000)
    assert failures(response) == {message.message_id for message in messages}
    assert states(crt, job_ids) == [("retry_wait", 1)] * 4
    warnings = [r for r in caplog.records if "will retry" in r.getMessage()]
    assert len(warnings) == 4
    # The handler wrote its metrics when it returned: 4 retries, as one EMF document.
    (document,) = [d for d in flushed if "callbacks_retried" in d]
    assert document["callbacks_retried"] == 4


def test_only_the_messages_that_raise_are_failures_and_all_raising_fails_the_invocation(
    crt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_ids = submit_many(crt, 3)
    broken = job_ids[0]
    # An attempt's first call: the read of its callback with its job.
    read = CallbackStore.get_with_job

    def flaky(self: CallbackStore, ref: IntentRef, *, with_result: bool = True) -> Any:
        if ref.job_id == broken:
            raise RuntimeError("DynamoDB refused the read")
        return read(self, ref, with_result=with_result)

    def ok(_target: Any, _body: bytes, _headers: Any, _timeout: float) -> HttpResult:
        return HttpResult(204, "", None)

    messages = receive(crt, 3)
    monkeypatch.setattr(CallbackStore, "get_with_job", flaky)
    kept = deliver_batch(replace(crt, poster=ok), messages, lambda: 30_000)
    by_job = {message.body: message.message_id for message in messages}
    (failed,) = kept
    assert broken in next(body for body, mid in by_job.items() if mid == failed)

    # Every message raises: a fault of the function itself, so the invocation fails.
    def refused(self: CallbackStore, ref: IntentRef) -> Any:
        raise RuntimeError("no table access")

    monkeypatch.setattr(CallbackStore, "get_with_job", refused)
    with pytest.raises(BatchFailedError):
        deliver_batch(replace(crt, poster=ok), messages, lambda: 30_000)
