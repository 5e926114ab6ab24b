"""The shells of the functions no HTTP request triggers: the dispatcher's (DynamoDB Streams) and
the sweep's (schedule) run their service under the invocation's deadline, like the others."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from jobstream import deadline
from jobstream import runtime as runtime_module
from jobstream.deadline import ANSWER_MARGIN_MS, Deadline
from jobstream.runtime import Runtime
from jobstream.schedule_handler import schedule_handler
from jobstream.stream_handler import stream_handler


class Context:
    function_name = "TestFunction"
    aws_request_id = "request-1"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


@pytest.fixture
def no_runtime(monkeypatch: pytest.MonkeyPatch) -> object:
    marker = object()
    monkeypatch.setattr(runtime_module, "runtime", lambda: marker)
    return marker


def remaining_ms(seen: Deadline | None) -> float:
    assert seen is not None, "the service ran without the invocation's deadline"
    return seen.remaining_ms()


def test_the_stream_shell_reports_the_failed_records(no_runtime: object) -> None:
    calls: list[tuple[object, Sequence[Mapping[str, Any]], Deadline | None]] = []

    def service(rt: Runtime, records: Sequence[Mapping[str, Any]]) -> list[str]:
        calls.append((rt, records, deadline.invocation_deadline()))
        return ["200"]

    records = [{"dynamodb": {"SequenceNumber": "100"}}, {"dynamodb": {"SequenceNumber": "200"}}]
    answer = stream_handler(service)({"Records": records}, Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "200"}]}
    ((rt, seen_records, seen_deadline),) = calls
    assert rt is no_runtime
    assert seen_records == records
    assert 0 < remaining_ms(seen_deadline) <= 10_000 - ANSWER_MARGIN_MS
    assert deadline.invocation_deadline() is None  # only for the invocation


def test_the_stream_shell_takes_an_event_without_records(no_runtime: object) -> None:
    assert stream_handler(lambda rt, records: list(map(str, records)))({}, None) == {
        "batchItemFailures": []
    }


def test_the_schedule_shell_answers_the_service_report(no_runtime: object) -> None:
    seen: list[Deadline | None] = []

    def service(rt: Runtime) -> dict[str, int]:
        assert rt is no_runtime
        seen.append(deadline.invocation_deadline())
        return {"jobs_checked": 3}

    assert schedule_handler(service)({"source": "aws.scheduler"}, Context()) == {"jobs_checked": 3}
    assert 0 < remaining_ms(seen[0]) <= 10_000 - ANSWER_MARGIN_MS
