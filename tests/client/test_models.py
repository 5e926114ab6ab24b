"""Decoding protocol documents: tolerant of what the protocol allows, strict on the rest."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from jobstream_client import (
    AckResult,
    Capabilities,
    ErrorInfo,
    Event,
    EventPage,
    Job,
    JobPage,
    new_task,
)
from jobstream_client.models import DocumentError
from tests.support.validation import FIXTURES

JOB: dict[str, Any] = {
    "protocol_version": "1",
    "job_id": "j-1",
    "job_type": "candidate_search",
    "status": "failed",
    "created_at": 1_700_000_000_000,
    "updated_at": 1_700_000_001_000,
    "started_at": None,
    "progress": {"stage": "failed", "at": 1_700_000_001_000},
    "error": {"code": "no_candidate", "retryable": True, "detail": {"internal_code": "x"}},
}

DECODERS: dict[str, Callable[[Any], object]] = {
    "job": Job.from_dict,
    "event": Event.from_dict,
    "eventpage": EventPage.from_dict,
    "jobpage": JobPage.from_dict,
    "ackresult": AckResult.from_dict,
    "capabilities": Capabilities.from_dict,
}


def test_a_job_keeps_unknown_fields_and_reads_null_as_absent() -> None:
    job = Job.from_dict({**JOB, "brand_new_field": {"x": 1}})
    assert job.terminal
    assert job.started_at is None
    assert job.error == ErrorInfo("no_candidate", True, None, {"internal_code": "x"})
    assert job.raw["brand_new_field"] == {"x": 1}
    assert job.progress is not None
    assert job.progress.stage == "failed"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"job_id": None}, "Job.job_id must be str"),
        ({"created_at": "1700000000000"}, "Job.created_at must be int"),
        ({"created_at": True}, "Job.created_at must be int"),
        ({"lease_active": "yes"}, "Job.lease_active must be bool"),
        ({"error": {"code": "x"}}, "Job.error.retryable must be bool"),
    ],
)
def test_a_job_with_a_wrong_required_or_typed_field_is_refused(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(DocumentError, match=message):
        Job.from_dict({**JOB, **change})


def test_an_event_page_with_its_terminal_event() -> None:
    event = {
        "protocol_version": "1",
        "event_id": "e-2",
        "job_id": "j-1",
        "type": "job.failed",
        "at": 1_700_000_001_000,
        "payload": {"job": JOB, "error": JOB["error"]},
    }
    page = EventPage.from_dict({"job_id": "j-1", "events": [event], "next_after": ""})
    assert page.next_after is None  # empty means caught up
    (decoded,) = page.events
    assert decoded.terminal
    assert decoded.job is not None
    assert decoded.job.status == "failed"
    assert decoded.error is not None
    assert decoded.error.code == "no_candidate"
    assert decoded.result is None


def test_a_progress_event_reports_its_progress() -> None:
    event = {
        "protocol_version": "1",
        "event_id": "e-3",
        "job_id": "j-1",
        "type": "job.progress",
        "at": 1_700_000_000_500,
        "payload": {"progress": {"stage": "searching", "message": "scanned 10", "at": 5}},
    }
    decoded = Event.from_dict(event)
    assert decoded.progress is not None
    assert (decoded.progress.stage, decoded.progress.message, decoded.progress.at) == (
        "searching",
        "scanned 10",
        5,
    )
    assert Event.from_dict({**event, "payload": {}}).progress is None  # a terser producer
    with pytest.raises(DocumentError, match=r"Event\.payload\.progress\.stage must be str"):
        _ = Event.from_dict({**event, "payload": {"progress": {"message": "m"}}}).progress


def test_new_task_has_a_fresh_key_unless_given_one() -> None:
    first = new_task("candidate_search", {"target_id": "t"})
    second = new_task("candidate_search", {"target_id": "t"}, callback_url="https://x/y")
    assert first["idempotency_key"] != second["idempotency_key"]
    assert "callback_url" not in first
    assert second["callback_url"] == "https://x/y"
    assert new_task("t", {}, idempotency_key="k")["idempotency_key"] == "k"


def test_every_published_fixture_decodes() -> None:
    if not FIXTURES.exists():
        pytest.skip("the published protocol (../shared/protocol/v1) is not checked out here")
    decoded = 0
    for path in sorted(FIXTURES.glob("*.json")):
        decoder = DECODERS.get(path.name.split(".", 1)[0])
        if decoder is None:
            continue  # tasks: the SDK sends them, it does not read them
        decoder(json.loads(path.read_text(encoding="utf-8")))
        decoded += 1
    assert decoded >= 10
