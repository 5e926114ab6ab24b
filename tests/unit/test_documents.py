"""Document builders (reference §2.1, §3, §4, §5.6-5.8, §7.3) and the read-route query parsers
(§1.4, §1.7, §1.8, design §1.5). Every produced document is validated against the schemas."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jobstream.config.targets import TargetsFile
from jobstream.domain import JobRecord, StoredEvent
from jobstream.http.statuses import http_status
from jobstream.jobtypes import registry
from jobstream.lifecycle.transitions import terminal_status_for
from jobstream.protocol import documents
from jobstream.protocol.documents import ack_result, capabilities, job_error
from jobstream.protocol.errors import ErrorCode, ProtocolError
from jobstream.protocol.events import event_id
from jobstream.protocol.queries import parse_ack_body, parse_events_query, parse_list_query
from tests.support.shown import event_document, event_page, job_document, job_page, submission
from tests.support.validation import validate, validate_error

CREATED = 1_790_481_174_000
NOW = 1_790_481_290_000
JOB_ID = "j_acme_6eb50329-20f2-4ea7-b95b-e4676b50d9f1"
KEY = "6eb50329-20f2-4ea7-b95b-e4676b50d9f1"

# §3 tables, written out: reason -> (code, retryable default).
REASON_CODES: dict[str, tuple[str, bool]] = {
    "no_candidate": ("no_candidate", True),
    "duplicate_exhausted": ("no_candidate", True),
    "filter_exhausted": ("no_candidate", True),
    "download_timeout": ("source_error", True),
    "download_failed": ("source_error", True),
    "metadata_failed": ("source_error", True),
    "remote_http_error": ("source_error", True),
    "network_error": ("source_error", True),
    "rate_limited": ("quota_exceeded", True),
    "auth_failed": ("auth_error", False),
    "delivery_failed": ("delivery_failed", True),
    "telegram_failed": ("delivery_failed", True),
    "telepost_rejected": ("delivery_rejected", False),
    "delivery_abandoned": ("delivery_abandoned", True),
    "cancelled_by_consumer": ("cancelled_by_consumer", False),
    "queued_too_long": ("queued_too_long", True),
    "stalled_no_heartbeat": ("stalled_no_progress", True),
    "execution_timeout": ("deadline_exceeded", True),
    "configuration_error": ("internal_error", False),
    "internal_error": ("internal_error", False),
}
EXPIRY_REASONS = {"queued_too_long", "stalled_no_heartbeat", "execution_timeout"}


def status_for_reason(reason: str) -> str:
    """§4.3: the reason decides cancelled / expired / failed."""
    if reason == "cancelled_by_consumer":
        return "cancelled"
    if reason in EXPIRY_REASONS:
        return "expired"
    return "failed"


RESULT = {
    "candidates": [
        {
            "candidate_id": "149713092",
            "platform": "pixiv",
            "work_id": "149713092",
            "work_type": "illustration",
        }
    ],
    "scanned": 5,
}

# §2.1: the Job's keys, in the reference order (labels are our addition, see design §1.4).
JOB_KEY_ORDER = [
    "protocol_version",
    "job_id",
    "job_type",
    "status",
    "created_at",
    "updated_at",
    "started_at",
    "heartbeat_at",
    "deadline_at",
    "lease_active",
    "lease_expires_at",
    "attempt",
    "progress",
    "idempotency_key",
    "correlation_id",
    "events_url",
]

BUSINESS_TERMS = ("refetch", "review", "slot", "telegram", "message_id", "disposition")


def record(**overrides: Any) -> JobRecord:
    values: dict[str, Any] = {
        "job_id": JOB_ID,
        "tenant": "acme",
        "job_type": "candidate_search",
        "idempotency_key": KEY,
        "params": {"query": {"tags": ["西瓜肚"]}},
        "params_canonical": '{"query":{"tags":["西瓜肚"]}}',
        "target_id": "demo-illustration",
        "status": "queued",
        "created_at": CREATED,
        "updated_at": CREATED,
        "deadline_at": CREATED + 1_800_000,
        "correlation_id": "review-chain:135",
    }
    values.update(overrides)
    return JobRecord(**values)


def running(**overrides: Any) -> JobRecord:
    values: dict[str, Any] = {
        "status": "running",
        "started_at": CREATED + 4_000,
        "heartbeat_at": CREATED + 34_000,
        "updated_at": CREATED + 34_000,
        "lease_owner": "worker-1",
        "lease_expires_at": NOW + 60_000,
        "attempt": 1,
        "progress_stage": "searching",
    }
    values.update(overrides)
    return record(**values)


def succeeded(**overrides: Any) -> JobRecord:
    values: dict[str, Any] = {"status": "succeeded", "updated_at": CREATED + 90_000}
    values.update(overrides)
    return running(lease_owner=None, **{"result": RESULT, **values})


def finished(reason: str | None, status: str | None = None, **overrides: Any) -> JobRecord:
    status = status or (status_for_reason(reason) if reason else "failed")
    return record(status=status, reason=reason, updated_at=CREATED + 90_000, **overrides)


def keys_without_labels(document: dict[str, Any]) -> list[str]:
    return [key for key in document if key != "labels"]


def all_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in all_keys(v)}
    if isinstance(value, list):
        return {k for item in value for k in all_keys(item)}
    return set()


# --------------------------------------------------------------------------------------------
# Job (§2.1, §4.4)


def test_queued_job_document() -> None:
    document = job_document(record(), NOW)
    validate(document, "Job")
    assert keys_without_labels(document) == JOB_KEY_ORDER
    assert document == {
        "protocol_version": "1",
        "job_id": JOB_ID,
        "job_type": "candidate_search",
        "status": "queued",
        "created_at": CREATED,
        "updated_at": CREATED,
        "started_at": None,
        "heartbeat_at": None,
        "deadline_at": CREATED + 1_800_000,
        "lease_active": False,
        "lease_expires_at": None,
        "attempt": 0,
        "progress": {"stage": "queued", "at": CREATED},
        "idempotency_key": KEY,
        "correlation_id": "review-chain:135",
        "events_url": f"/jobs/{JOB_ID}/events",
    }
    assert "result" not in document
    assert "error" not in document


def test_running_job_document() -> None:
    document = job_document(running(), NOW)
    validate(document, "Job")
    assert keys_without_labels(document) == JOB_KEY_ORDER
    assert document["status"] == "running"
    assert document["started_at"] == CREATED + 4_000
    assert document["heartbeat_at"] == CREATED + 34_000
    assert document["lease_active"] is True
    assert document["lease_expires_at"] == NOW + 60_000
    assert document["attempt"] == 1
    assert document["progress"] == {"stage": "searching", "at": CREATED + 34_000}
    assert "result" not in document
    assert "error" not in document


def test_running_job_reports_the_executors_stage_and_message() -> None:
    document = job_document(
        running(progress_stage="delivering", progress_message="3 of 5 scanned"), NOW
    )
    validate(document, "Job")
    assert document["progress"]["stage"] == "delivering"
    assert document["progress"]["message"] == "3 of 5 scanned"
    assert document["progress"]["at"] == CREATED + 34_000


def test_running_job_without_a_stage_is_searching() -> None:
    assert job_document(running(progress_stage=None), NOW)["progress"]["stage"] == "searching"


@pytest.mark.parametrize(
    ("status", "stage"),
    [("queued", "queued"), ("succeeded", "done"), ("failed", "failed"), ("expired", "expired")],
)
def test_a_stale_executor_stage_never_leaks_outside_running(status: str, stage: str) -> None:
    job = record(status=status, progress_stage="searching", result=RESULT, reason="no_candidate")
    assert job_document(job, NOW)["progress"]["stage"] == stage


def test_succeeded_job_document() -> None:
    document = job_document(succeeded(), NOW)
    validate(document, "Job")
    validate(document["result"], "Result_CandidateSearch")
    assert keys_without_labels(document) == [*JOB_KEY_ORDER, "result"]
    assert document["status"] == "succeeded"
    assert document["result"] == RESULT
    assert "error" not in document
    assert document["progress"]["stage"] == "done"


def test_succeeded_job_never_sends_result_null() -> None:
    document = job_document(succeeded(result=None), NOW)
    validate(document, "Job")
    assert document["result"] is not None
    validate(document["result"], "Result_CandidateSearch")
    assert "error" not in document


@pytest.mark.parametrize("reason", sorted(REASON_CODES))
def test_terminal_job_error_maps_every_reason(reason: str) -> None:
    code, retryable = REASON_CODES[reason]
    status = status_for_reason(reason)
    document = job_document(finished(reason, reason_message="业务消息"), NOW)
    validate(document, "Job")
    assert document["status"] == status
    assert keys_without_labels(document) == [*JOB_KEY_ORDER, "error"]
    assert "result" not in document
    assert document["error"] == {
        "code": code,
        "message": "业务消息",
        "retryable": retryable,
        "detail": {"internal_code": reason},
    }
    assert document["progress"]["stage"] == status
    validate_error({"error": document["error"]})


@pytest.mark.parametrize("reason", sorted(REASON_CODES))
def test_terminal_job_error_has_a_message_without_a_stored_one(reason: str) -> None:
    error = job_document(finished(reason), NOW)["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    assert error["code"] == REASON_CODES[reason][0]


@pytest.mark.parametrize("status", ["failed", "cancelled", "expired"])
def test_a_terminal_job_without_a_reason_is_an_internal_error(status: str) -> None:
    document = job_document(finished(None, status=status), NOW)
    validate(document, "Job")
    assert document["error"]["code"] == "internal_error"
    assert document["error"]["retryable"] is False
    assert "detail" not in document["error"]


def test_an_unknown_reason_is_an_internal_error_that_names_it() -> None:
    document = job_document(finished("brand_new_reason", status="failed"), NOW)
    validate(document, "Job")
    assert document["error"]["code"] == "internal_error"
    assert document["error"]["retryable"] is False
    assert document["error"]["detail"] == {"internal_code": "brand_new_reason"}


def test_no_candidate_is_retryable_by_table_default() -> None:
    # §9.21: the producer always sends the table default, even though a fixture shows false.
    assert job_error(finished("no_candidate"))["retryable"] is True


def test_cancelled_job_matches_the_conformance_expectation() -> None:
    document = job_document(finished("cancelled_by_consumer", reason_message="任务已被取消"), NOW)
    assert document["status"] == "cancelled"
    assert document["error"]["code"] == "cancelled_by_consumer"
    assert document["error"]["retryable"] is False
    assert document["error"]["detail"]["internal_code"] == "cancelled_by_consumer"


@pytest.mark.parametrize(
    ("owner", "expires", "active"),
    [
        ("worker-1", NOW + 1, True),
        ("worker-1", NOW + 180_000, True),
        ("worker-1", NOW, False),
        ("worker-1", NOW - 1, False),
        ("worker-1", None, False),
        (None, NOW + 60_000, False),
        ("", NOW + 60_000, False),
    ],
)
def test_lease_active_needs_an_owner_and_a_future_expiry(
    owner: str | None, expires: int | None, active: bool
) -> None:
    document = job_document(running(lease_owner=owner, lease_expires_at=expires), NOW)
    validate(document, "Job")
    assert document["lease_active"] is active
    # The stored expiry is reported as is, even when already in the past.
    assert document["lease_expires_at"] == expires


def test_lease_active_follows_the_clock() -> None:
    job = running(lease_expires_at=NOW + 10)
    assert job_document(job, NOW)["lease_active"] is True
    assert job_document(job, NOW + 10)["lease_active"] is False


@pytest.mark.parametrize("correlation_id", [None, ""])
def test_correlation_id_is_omitted_when_empty(correlation_id: str | None) -> None:
    document = job_document(record(correlation_id=correlation_id), NOW)
    validate(document, "Job")
    assert "correlation_id" not in document
    assert keys_without_labels(document) == [k for k in JOB_KEY_ORDER if k != "correlation_id"]


def test_labels_are_echoed() -> None:
    labels = {"origin": "moderation", "tenant": "bot1"}
    document = job_document(record(labels=labels), NOW)
    validate(document, "Job")
    assert document["labels"] == labels
    assert keys_without_labels(document) == JOB_KEY_ORDER


def test_no_labels_no_key() -> None:
    assert "labels" not in job_document(record(labels=None), NOW)


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        (None, f"/jobs/{JOB_ID}/events"),
        ("", f"/jobs/{JOB_ID}/events"),
        ("https://api.example.com", f"https://api.example.com/jobs/{JOB_ID}/events"),
        ("https://api.example.com/", f"https://api.example.com/jobs/{JOB_ID}/events"),
        ("http://127.0.0.1:3000/prod", f"http://127.0.0.1:3000/prod/jobs/{JOB_ID}/events"),
    ],
)
def test_events_url_is_absolute_with_a_base_url(base_url: str | None, url: str) -> None:
    document = job_document(record(), NOW, base_url)
    validate(document, "Job")
    assert document["events_url"] == url


def test_job_document_carries_no_internal_vocabulary() -> None:
    for job in (record(), running(), succeeded(), finished("telegram_failed")):
        document = job_document(job, NOW)
        for key in all_keys(document):
            assert not any(term in key.lower() for term in BUSINESS_TERMS), key
        assert "tenant" not in document
        assert "params" not in document
        assert "target_id" not in document


def test_submission_has_exactly_one_key() -> None:
    body = submission(record(), NOW, "https://api.example.com")
    assert list(body) == ["job"]
    assert body["job"] == job_document(record(), NOW, "https://api.example.com")
    validate(body["job"], "Job")


# --------------------------------------------------------------------------------------------
# terminal_status_for (§4.3)


@pytest.mark.parametrize("reason", sorted(REASON_CODES))
def test_terminal_status_for_every_reason(reason: str) -> None:
    assert terminal_status_for(reason) == status_for_reason(reason)


@pytest.mark.parametrize("reason", [None, "", "brand_new_reason"])
def test_terminal_status_without_a_known_reason_is_failed(reason: str | None) -> None:
    assert terminal_status_for(reason) == "failed"


# --------------------------------------------------------------------------------------------
# Events (§5.8)


def stored(sequence: int, kind: str, at: int | None = None) -> StoredEvent:
    return StoredEvent(job_id=JOB_ID, sequence=sequence, kind=kind, at=at or CREATED + sequence)


@pytest.mark.parametrize(
    ("kind", "event_type", "job"),
    [
        ("job.requested", "job.accepted", record()),
        ("job.execution_started", "job.started", running()),
        ("job.progressed", "job.progress", running()),
    ],
)
def test_non_terminal_event_payload_is_only_the_internal_kind(
    kind: str, event_type: str, job: JobRecord
) -> None:
    document = event_document(job, stored(2, kind, CREATED + 500), NOW)
    assert document is not None
    validate(document, "Event")
    assert document["protocol_version"] == "1"
    assert document["event_id"] == event_id(JOB_ID, CREATED + 500, 2)
    assert document["job_id"] == JOB_ID
    assert document["type"] == event_type
    assert document["at"] == CREATED + 500
    assert document["correlation_id"] == "review-chain:135"
    assert document["payload"] == {"detail": {"internal_kind": kind}}
    assert set(document) == {
        "protocol_version",
        "event_id",
        "job_id",
        "type",
        "at",
        "correlation_id",
        "payload",
    }


@pytest.mark.parametrize("message", ["scanned 10 of 60 works", None])
def test_a_progress_event_carries_its_own_progress(message: str | None) -> None:
    """What the event reported, whatever the job reports now (its stage moved on)."""
    event = replace(
        stored(3, "job.progressed", CREATED + 700),
        progress_stage="searching",
        progress_message=message,
    )
    job = running(progress_stage="ranking", progress_message="best of 60")
    document = event_document(job, event, NOW)
    assert document is not None
    validate(document, "Event")
    validate(document["payload"]["progress"], "Progress")
    expected = {"stage": "searching", **({"message": message} if message else {})}
    assert document["payload"] == {
        "detail": {"internal_kind": "job.progressed"},
        "progress": {**expected, "at": CREATED + 700},
    }


def test_succeeded_event_carries_job_and_result() -> None:
    job = succeeded()
    document = event_document(job, stored(3, "job.outcome_succeeded"), NOW, "https://x.test")
    assert document is not None
    validate(document, "Event")
    payload = document["payload"]
    assert set(payload) == {"detail", "job", "result"}
    assert "error" not in payload
    assert payload["detail"] == {"internal_kind": "job.outcome_succeeded"}
    assert payload["job"] == job_document(job, NOW, "https://x.test")
    assert payload["result"] == RESULT
    validate(payload["job"], "Job")


@pytest.mark.parametrize(
    ("kind", "event_type", "reason"),
    [
        ("job.outcome_failed", "job.failed", "delivery_failed"),
        ("job.outcome_expired", "job.expired", "queued_too_long"),
        ("job.outcome_cancelled", "job.cancelled", "cancelled_by_consumer"),
    ],
)
def test_unsuccessful_terminal_events_carry_job_and_error(
    kind: str, event_type: str, reason: str
) -> None:
    job = finished(reason)
    document = event_document(job, stored(2, kind), NOW)
    assert document is not None
    validate(document, "Event")
    assert document["type"] == event_type
    payload = document["payload"]
    assert set(payload) == {"detail", "job", "error"}
    assert "result" not in payload
    assert payload["detail"] == {"internal_kind": kind}
    assert payload["job"]["status"] == status_for_reason(reason)
    assert payload["error"] == payload["job"]["error"]
    assert payload["error"]["code"] == REASON_CODES[reason][0]
    assert payload["error"]["detail"] == {"internal_code": reason}
    validate_error({"error": payload["error"]})


def test_expired_without_start_event_job_has_no_started_at() -> None:
    document = event_document(finished("queued_too_long"), stored(2, "job.outcome_expired"), NOW)
    assert document is not None
    assert document["payload"]["job"]["started_at"] is None
    assert document["payload"]["error"]["code"] == "queued_too_long"


@pytest.mark.parametrize(
    "kind",
    [
        "execution.summary",
        "delivery.duplicate",
        "media.fallback",
        "outbox.claimed",
        "outbox.deferred",
        "outbox.delivered",
        "outbox.retry_scheduled",
        "outbox.dead",
        "outbox.cancelled",
        "outbox.replay_requested",
        "job.brand_new_thing",
        "totally.unmapped",
        "job.accepted",
    ],
)
def test_internal_and_unknown_kinds_produce_no_event(kind: str) -> None:
    assert event_document(record(), stored(1, kind), NOW) is None


def test_event_correlation_id_is_omitted_when_empty() -> None:
    for correlation_id in (None, ""):
        document = event_document(
            record(correlation_id=correlation_id), stored(1, "job.requested"), NOW
        )
        assert document is not None
        assert "correlation_id" not in document
        validate(document, "Event")


def test_event_labels_are_echoed() -> None:
    labels = {"origin": "moderation"}
    document = event_document(record(labels=labels), stored(1, "job.requested"), NOW)
    assert document is not None
    validate(document, "Event")
    assert document["labels"] == labels


# --------------------------------------------------------------------------------------------
# EventPage (§5.6) and AckResult (§5.7)

LIFECYCLE = [
    stored(1, "job.requested", CREATED),
    stored(2, "job.execution_started", CREATED + 4_000),
    stored(3, "job.outcome_failed", CREATED + 90_000),
]


def test_event_page_shape_without_more() -> None:
    job = finished("delivery_failed", started_at=CREATED + 4_000, event_count=3)
    page = event_page(job, LIFECYCLE, has_more=False, now=NOW)
    validate(page, "EventPage")
    assert set(page) == {"job_id", "events", "unacked", "server_time"}
    assert page["job_id"] == JOB_ID
    assert [event["type"] for event in page["events"]] == [
        "job.accepted",
        "job.started",
        "job.failed",
    ]
    assert [event["event_id"] for event in page["events"]] == [
        event_id(JOB_ID, CREATED, 1),
        event_id(JOB_ID, CREATED + 4_000, 2),
        event_id(JOB_ID, CREATED + 90_000, 3),
    ]
    assert page["unacked"] == 3
    assert page["server_time"] == NOW
    for event in page["events"]:
        validate(event, "Event")


def test_event_page_next_after_only_when_more_exist() -> None:
    job = record(event_count=2)
    events = LIFECYCLE[:2]
    more = event_page(job, events, has_more=True, now=NOW)
    validate(more, "EventPage")
    assert more["next_after"] == event_id(JOB_ID, CREATED + 4_000, 2)
    assert "next_after" not in event_page(job, events, has_more=False, now=NOW)


def test_event_page_drops_internal_rows() -> None:
    events = [
        stored(1, "job.requested"),
        stored(2, "outbox.claimed"),
        stored(3, "totally.unmapped"),
        stored(4, "job.execution_started"),
        stored(5, "outbox.delivered"),
    ]
    page = event_page(running(event_count=2), events, has_more=True, now=NOW)
    validate(page, "EventPage")
    assert [event["type"] for event in page["events"]] == ["job.accepted", "job.started"]
    # next_after names the last event the consumer can see, never an internal row.
    assert page["next_after"] == page["events"][-1]["event_id"]


def test_an_empty_page_has_no_next_after() -> None:
    page = event_page(record(event_count=1, ack_sequence=1), [], has_more=True, now=NOW)
    validate(page, "EventPage")
    assert page["events"] == []
    assert "next_after" not in page
    assert page["unacked"] == 0


@pytest.mark.parametrize(
    ("event_count", "ack_sequence", "unacked"),
    [(1, 0, 1), (2, 0, 2), (3, 1, 2), (3, 3, 0), (7, 4, 3)],
)
def test_unacked_counts_events_after_the_cursor(
    event_count: int, ack_sequence: int, unacked: int
) -> None:
    job = record(event_count=event_count, ack_sequence=ack_sequence)
    page = event_page(job, LIFECYCLE[:1], has_more=False, now=NOW)
    assert page["unacked"] == unacked
    result = ack_result(job, NOW)
    validate(result, "AckResult")
    assert result == {
        "job_id": JOB_ID,
        "acked": event_count - unacked,
        "unacked": unacked,
        "server_time": NOW,
    }
    assert list(result) == ["job_id", "acked", "unacked", "server_time"]


def test_unacked_is_independent_of_the_page_read() -> None:
    job = record(event_count=3, ack_sequence=1)
    # A page read with `after` shows fewer events but reports the cursor's count.
    assert event_page(job, LIFECYCLE[2:], has_more=False, now=NOW)["unacked"] == 2
    assert event_page(job, LIFECYCLE, has_more=False, now=NOW)["unacked"] == 2


def test_never_acked_job_reports_zero_acked() -> None:
    result = ack_result(record(event_count=2), NOW)
    validate(result, "AckResult")
    assert result["acked"] == 0
    assert result["unacked"] == 2


# --------------------------------------------------------------------------------------------
# JobPage


def test_job_page_without_a_cursor() -> None:
    page = job_page([record(), succeeded()], next_cursor=None, now=NOW)
    validate(page, "JobPage")
    assert list(page) == ["jobs", "server_time"]
    assert [job["status"] for job in page["jobs"]] == ["queued", "succeeded"]
    assert page["jobs"][0] == job_document(record(), NOW)
    assert page["server_time"] == NOW


def test_job_page_with_a_cursor() -> None:
    page = job_page([record()], next_cursor="opaque-cursor", now=NOW, base_url="https://x.test")
    validate(page, "JobPage")
    assert page["next_cursor"] == "opaque-cursor"
    assert page["jobs"][0]["events_url"] == f"https://x.test/jobs/{JOB_ID}/events"


def test_empty_job_page() -> None:
    for cursor in (None, ""):
        page = job_page([], next_cursor=cursor, now=NOW)
        validate(page, "JobPage")
        assert page == {"jobs": [], "server_time": NOW}


# --------------------------------------------------------------------------------------------
# Capabilities (§1.2, §7.3)


def target(
    target_id: str, *, enabled: bool = True, timeout_ms: int | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": target_id,
        "enabled": enabled,
        "work_type": "illustration",
        "source": "catalog",
        "query": {"tags": ["landscape"]},
    }
    if timeout_ms is not None:
        entry["timeout_ms"] = timeout_ms
    return entry


def caps(*targets: dict[str, Any], fallback: int = 1_800_000) -> dict[str, Any]:
    targets_file = TargetsFile.model_validate({"targets": list(targets)})
    return capabilities(
        job_types=registry.job_types(),
        queued_timeout_ms=1_800_000,
        stall_timeout_ms=900_000,
        heartbeat_interval_ms=30_000,
        default_deadline_ms=targets_file.longest_ceiling_ms(fallback),
        now=NOW,
    )


def test_capabilities_document() -> None:
    document = caps(target("bot1-illust", timeout_ms=1_200_000))
    validate(document, "Capabilities")
    assert list(document) == [
        "protocol_versions",
        "job_types",
        "limits",
        "extensions",
        "server_time",
    ]
    assert document["protocol_versions"] == ["1"]
    assert document["server_time"] == NOW
    # One declaration per registered job type, in the registry's order.
    assert [entry["name"] for entry in document["job_types"]] == list(registry.names())
    declaration, fetch = document["job_types"]
    validate(declaration, "JobTypeDeclaration")
    validate(fetch, "JobTypeDeclaration")
    budgets = {
        "queued_timeout_ms": 1_800_000,
        "stall_timeout_ms": 900_000,
        "heartbeat_interval_ms": 30_000,
        "default_deadline_ms": 1_200_000,
    }
    assert declaration == {
        "name": "candidate_search",
        "params_schema": "#/$defs/CandidateSearchParams",
        "result_schema": "#/$defs/Result_CandidateSearch",
        "features": [
            "events",
            "progress",
            "cancel",
            "idempotency",
            "exclude",
            "tag_expansion",
            "target_selector",
        ],
        **budgets,
    }
    assert fetch == {
        "name": "asset_fetch",
        "params_schema": "#/$defs/AssetFetchParams",
        "result_schema": "#/$defs/Result_AssetFetch",
        "features": ["events", "progress", "cancel", "idempotency", "target_selector"],
        **budgets,
    }
    assert document["limits"] == {
        "job_types": {
            "candidate_search": {
                "max_tags": 20,
                "max_excludes": 100,
                "max_candidates_per_job": 100,
                "max_scan_limit": 100,
            },
            "asset_fetch": {"max_assets": 20},
        }
    }


def test_capabilities_report_the_live_budgets() -> None:
    document = capabilities(
        job_types=registry.job_types(),
        queued_timeout_ms=660_000,
        stall_timeout_ms=420_000,
        heartbeat_interval_ms=30_000,
        default_deadline_ms=1_800_000,
        now=NOW + 1,
    )
    validate(document, "Capabilities")
    declaration = document["job_types"][0]
    assert declaration["queued_timeout_ms"] == 660_000
    assert declaration["stall_timeout_ms"] == 420_000
    assert document["server_time"] == NOW + 1


@pytest.mark.parametrize(
    ("targets", "fallback", "expected"),
    [
        # the largest timeout among enabled targets
        ([target("a", timeout_ms=1_200_000)], 1_800_000, 1_200_000),
        ([target("a", timeout_ms=5_400_000)], 1_800_000, 5_400_000),
        (
            [target("a", timeout_ms=1_200_000), target("b", timeout_ms=5_400_000)],
            1_800_000,
            5_400_000,
        ),
        # disabled targets do not count
        (
            [target("a", timeout_ms=1_200_000), target("b", enabled=False, timeout_ms=9_000_000)],
            1_800_000,
            1_200_000,
        ),
        # A target without a timeout runs under the fallback ceiling, so it counts as that
        # (a deliberate deviation from the reference, which ignores it and under-reports).
        ([target("a", timeout_ms=1_200_000), target("b")], 1_800_000, 1_800_000),
        ([target("a"), target("b")], 1_800_000, 1_800_000),
        ([target("a")], 2_400_000, 2_400_000),
        ([target("a", enabled=False, timeout_ms=9_000_000)], 1_800_000, 1_800_000),
        ([], 1_800_000, 1_800_000),
    ],
)
def test_default_deadline_is_the_largest_enabled_target_timeout(
    targets: list[dict[str, Any]], fallback: int, expected: int
) -> None:
    document = caps(*targets, fallback=fallback)
    validate(document, "Capabilities")
    assert document["job_types"][0]["default_deadline_ms"] == expected


def test_page_size_is_two_hundred() -> None:
    assert documents.PAGE_SIZE == 200


def test_documents_do_not_alias_the_record() -> None:
    labels = {"origin": "moderation"}
    job = record(labels=labels)
    document = job_document(job, NOW)
    document["labels"]["origin"] = "changed"
    assert labels == {"origin": "moderation"}
    assert job.labels == {"origin": "moderation"}


# --------------------------------------------------------------------------------------------
# GET /jobs/{id}/events query (§1.7)


def assert_query_error(error: ProtocolError, message: str, detail: dict[str, Any] | None) -> None:
    assert http_status(error) == 400
    assert error.code is ErrorCode.INVALID_PARAMS
    assert error.message == message
    assert error.detail == detail
    body = error.body()
    validate_error(body)
    assert body["error"]["retryable"] is False
    if detail is None:
        assert "detail" not in body["error"]


@pytest.mark.parametrize(
    ("query", "after", "unacked"),
    [
        ({}, None, False),
        ({"after": ["evt-1-1"]}, "evt-1-1", False),
        ({"after": ["not-an-event-id"]}, "not-an-event-id", False),
        ({"unacked": ["1"]}, None, True),
        ({"unacked": ["true"]}, None, True),
        ({"unacked": ["0"]}, None, False),
        ({"unacked": ["false"]}, None, False),
        ({"unacked": [""]}, None, False),
        ({"after": ["evt-5-2"], "unacked": ["1"]}, "evt-5-2", True),
        ({"other": ["x", "y"]}, None, False),
    ],
)
def test_events_query_accepted(
    query: dict[str, list[str]], after: str | None, unacked: bool
) -> None:
    assert parse_events_query(query) == (after, unacked)


@pytest.mark.parametrize("values", [[""], ["evt-1-1", "evt-1-2"], ["", ""]])
def test_events_query_after_must_be_a_single_non_empty_value(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_events_query({"after": values})
    assert_query_error(caught.value, "after must be a non-empty event_id", {"field": "after"})


@pytest.mark.parametrize(
    "values", [["maybe"], ["2"], ["TRUE"], ["yes"], [" 1"], ["1", "1"], ["0", "1"]]
)
def test_events_query_unacked_must_be_1_or_0(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_events_query({"unacked": values})
    assert_query_error(caught.value, "unacked must be 1 or 0", {"field": "unacked"})


def test_events_query_checks_after_before_unacked() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_events_query({"after": [""], "unacked": ["maybe"]})
    assert caught.value.detail == {"field": "after"}


# --------------------------------------------------------------------------------------------
# POST /jobs/{id}/events/ack body (§1.8)


@pytest.mark.parametrize("body", [None, [], ["evt-1-1"], "evt-1-1", 1, True])
def test_ack_body_must_be_an_object(body: Any) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_ack_body(body)
    assert_query_error(caught.value, "request body must be a JSON object", None)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ack_through": None},
        {"ack_through": ""},
        {"ack_through": 42},
        {"ack_through": True},
        {"ack_through": ["evt-1-1"]},
        {"ack_through": {"id": "evt-1-1"}},
        {"ackThrough": "evt-1-1"},
    ],
)
def test_ack_through_is_required(body: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_ack_body(body)
    assert_query_error(caught.value, "ack_through is required", {"field": "ack_through"})


@pytest.mark.parametrize("value", ["evt-1-1", "evt-99999999999-999999", "garbage", " "])
def test_any_non_empty_ack_through_is_accepted(value: str) -> None:
    # Malformed-but-non-empty ids are a 200 no-op later (§5.7), not a 400.
    assert parse_ack_body({"ack_through": value, "extra": 1}) == value


# --------------------------------------------------------------------------------------------
# GET /jobs query (§1.4 and design §1.5)


def test_list_query_defaults() -> None:
    parsed = parse_list_query({})
    assert parsed.idempotency_key is None
    assert parsed.correlation_id is None
    assert parsed.status is None
    assert parsed.limit == 100
    assert parsed.cursor is None


def test_list_query_all_filters() -> None:
    parsed = parse_list_query(
        {
            "idempotency_key": [KEY],
            "correlation_id": ["review-chain:135"],
            "status": ["running"],
            "limit": ["25"],
            "cursor": ["abc"],
        }
    )
    assert parsed.idempotency_key == KEY
    assert parsed.correlation_id == "review-chain:135"
    assert parsed.status == "running"
    assert parsed.limit == 25
    assert parsed.cursor == "abc"


@pytest.mark.parametrize("values", [[""], ["   "], ["\ufeff"], ["\t\u3000"], ["a", "b"]])
def test_list_query_blank_idempotency_key(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_list_query({"idempotency_key": values})
    assert_query_error(caught.value, "idempotency_key is required", None)


def test_list_query_idempotency_key_of_non_js_whitespace_is_not_blank() -> None:
    assert parse_list_query({"idempotency_key": ["\u0085"]}).idempotency_key is not None


@pytest.mark.parametrize(("text", "limit"), [("1", 1), ("100", 100), ("500", 500), ("42", 42)])
def test_list_query_limits(text: str, limit: int) -> None:
    assert parse_list_query({"limit": [text]}).limit == limit


@pytest.mark.parametrize(
    "values", [["0"], ["501"], ["-1"], ["abc"], ["1.5"], ["1e2"], ["\u0663"], ["10", "20"]]
)
def test_list_query_bad_limits(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_list_query({"limit": values})
    error = caught.value
    assert http_status(error) == 400
    assert error.code is ErrorCode.INVALID_PARAMS
    assert error.detail == {"field": "limit"}
    assert "limit" in error.message
    validate_error(error.body())


@pytest.mark.parametrize(
    "status", ["queued", "running", "succeeded", "failed", "cancelled", "expired"]
)
def test_list_query_every_status_is_a_filter(status: str) -> None:
    assert parse_list_query({"status": [status]}).status == status


@pytest.mark.parametrize("values", [["done"], ["QUEUED"], [""], ["pending"], ["queued", "running"]])
def test_list_query_bad_status(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_list_query({"status": values})
    error = caught.value
    assert http_status(error) == 400
    assert error.code is ErrorCode.INVALID_PARAMS
    assert error.detail == {"field": "status"}
    validate_error(error.body())
