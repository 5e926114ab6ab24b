"""The queue-triggered functions (worker, callbacks) through their one handler shell
(jobstream/sqs_handler.py): records in, one service call, the partial batch response out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from jobstream import runtime as runtime_module
from jobstream.queue import QueueMessage
from jobstream.runtime import Runtime
from jobstream.sqs_handler import sqs_handler
from tests.support.lambda_events import lambda_context, queue_handler, sqs_record

NAMING_NOTHING = ["not json", "[]", '{"job_id": 7, "sequence": "1"}', '{"job_id": ""}']


def records(*bodies: str) -> dict[str, Any]:
    return {
        "Records": [
            sqs_record(body, message_id=f"m-{index}", receipt_handle=f"r-{index}")
            for index, body in enumerate(bodies)
        ]
    }


@pytest.mark.parametrize("queue", ["WorkQueue", "CallbackQueue"])
def test_a_message_naming_nothing_is_dropped_not_redelivered(
    crt: Runtime, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing could ever process it: no batch item failure (SQS deletes it), an error logged."""
    with caplog.at_level(logging.ERROR, logger="jobstream.service.messages"):
        assert queue_handler(queue)(records(*NAMING_NOTHING), lambda_context()) == {
            "batchItemFailures": []
        }
    dropped = [r for r in caplog.records if r.getMessage().startswith("dropping a queue message")]
    assert len(dropped) == len(NAMING_NOTHING)


@pytest.mark.parametrize("queue", ["WorkQueue", "CallbackQueue"])
def test_an_empty_batch_keeps_nothing(crt: Runtime, queue: str) -> None:
    assert queue_handler(queue)({"Records": []}, lambda_context()) == {"batchItemFailures": []}


def test_the_shell_hands_the_service_the_batch_and_reports_what_it_keeps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = object()
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime)
    seen: list[Any] = []

    def service(
        rt: Any, messages: Sequence[QueueMessage], remaining_ms: Callable[[], int] | None
    ) -> list[str]:
        seen.append((rt, list(messages), remaining_ms() if remaining_ms else None))
        return [messages[1].message_id]

    response = sqs_handler(service)(records("a", "b", "c"), lambda_context(remaining_ms=12_345))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert seen == [
        (
            runtime,
            [QueueMessage(f"m-{i}", body, f"r-{i}") for i, body in enumerate("abc")],
            12_345,
        )
    ]
    # Without a Lambda context (the local stack's pollers may pass none) the time is unknown.
    sqs_handler(service)(records("a", "b"), None)
    assert seen[-1][2] is None


def test_each_message_says_how_often_sqs_handed_it_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime_module, "runtime", object)
    event = records("a", "b", "c")
    event["Records"][0]["attributes"] = {"ApproximateReceiveCount": "7"}
    event["Records"][1]["attributes"] = {"ApproximateReceiveCount": "not a number"}
    seen: list[int] = []

    def service(
        _rt: Any, messages: Sequence[QueueMessage], _remaining_ms: Callable[[], int] | None
    ) -> list[str]:
        seen.extend(message.receive_count for message in messages)
        return []

    sqs_handler(service)(event, lambda_context())
    # What Lambda does not say (the local stack's older pollers) counts as a first receive.
    assert seen == [7, 1, 1]
