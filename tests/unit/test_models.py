"""The pydantic models cover every object of the published schema and parse every fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jobstream.domain import JobRecord, StoredEvent
from jobstream.protocol import documents
from tests.support import shown
from tests.support.protocol_models import MODELS_BY_DEF, ErrorEnvelope, Job, JobReceipt
from tests.support.validation import FIXTURES, PUBLISHED_SCHEMA

FIXTURE_MODELS = {
    "task": "Task",
    "job": "Job",
    "event": "Event",
    "capabilities": "Capabilities",
    "jobpage": "JobPage",
    "eventpage": "EventPage",
    "ackresult": "AckResult",
}
# Definitions that are aliases or scalars in the schema rather than objects.
NOT_OBJECTS = {"ProtocolVersion", "Labels"}


def _fixtures() -> list[Path]:
    if not FIXTURES.exists():
        pytest.skip("the published protocol folder is not beside this checkout")
    return sorted(FIXTURES.glob("*.json"))


def test_every_published_object_has_a_model() -> None:
    if not PUBLISHED_SCHEMA.exists():
        pytest.skip("the published protocol folder is not beside this checkout")
    definitions = set(json.loads(PUBLISHED_SCHEMA.read_text(encoding="utf-8"))["$defs"])
    assert definitions - NOT_OBJECTS == set(MODELS_BY_DEF)


def test_every_fixture_parses_with_our_models() -> None:
    files = _fixtures()
    assert len(files) >= 5
    for path in files:
        model = MODELS_BY_DEF[FIXTURE_MODELS[path.name.split(".", 1)[0]]]
        document = json.loads(path.read_text(encoding="utf-8"))
        parsed = model.model_validate(document)
        # Unknown fields are kept, so a round trip loses nothing the fixture said.
        assert parsed.model_dump(mode="json", exclude_unset=True) == document


def test_unknown_fields_are_ignored_not_rejected() -> None:
    job = json.loads((_fixtures()[0].parent / "job.queued.json").read_text(encoding="utf-8"))
    job["future_field"] = {"nested": [1, 2, 3]}
    assert Job.model_validate(job).job_id == job["job_id"]


@pytest.mark.parametrize(
    "change",
    [
        {"status": "paused"},
        {"created_at": -1},
        {"job_id": ""},
        {"protocol_version": "2"},
        {"lease_active": "yes"},
        {"attempt": 1.5},
    ],
)
def test_invalid_jobs_are_rejected(change: dict[str, Any]) -> None:
    job = {
        "protocol_version": "1",
        "job_id": "job_1",
        "job_type": "candidate_search",
        "status": "queued",
        "created_at": 1,
        "updated_at": 1,
    }
    with pytest.raises(ValidationError):
        Job.model_validate({**job, **change})


def _record(status: str, **values: Any) -> JobRecord:
    return JobRecord(
        job_id="job_x",
        tenant="t",
        job_type="candidate_search",
        idempotency_key="k",
        params={},
        params_canonical="{}",
        target_id="t1",
        status=status,
        created_at=1_000,
        updated_at=2_000,
        event_count=2,
        last_event_at=2_000,
        **values,
    )


@pytest.mark.parametrize(
    "status", ["queued", "running", "succeeded", "failed", "cancelled", "expired"]
)
def test_produced_documents_parse_with_our_models(status: str) -> None:
    reason = {"failed": "no_candidate", "cancelled": "cancelled_by_consumer"}.get(status)
    record = _record(status, reason=reason, labels={"a": "b"}, correlation_id="c")
    job = shown.job_document(record, 3_000, "https://host")
    assert Job.model_validate(job).document() == job
    assert JobReceipt.model_validate(shown.submission(record, 3_000)).job.status == status
    events = [StoredEvent("job_x", 1, "job.requested", 1_000)]
    if record.is_terminal:
        kind = {
            "succeeded": "job.outcome_succeeded",
            "failed": "job.outcome_failed",
            "cancelled": "job.outcome_cancelled",
            "expired": "job.outcome_expired",
        }[status]
        events.append(StoredEvent("job_x", 2, kind, 2_000))
    page = shown.event_page(record, events, has_more=False, now=3_000)
    assert MODELS_BY_DEF["EventPage"].model_validate(page).document() == page
    ack = documents.ack_result(record, 3_000)
    assert MODELS_BY_DEF["AckResult"].model_validate(ack).document() == ack


def test_error_envelope_model() -> None:
    envelope = ErrorEnvelope.model_validate(
        {"error": {"code": "invalid_params", "message": "x", "retryable": False}}
    )
    assert envelope.error.code == "invalid_params"
    with pytest.raises(ValidationError):
        ErrorEnvelope.model_validate({"error": {"code": "not_a_code", "retryable": False}})
