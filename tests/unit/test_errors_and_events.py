"""The error catalogue (reference §3, error-mapping.json) and the event kinds and ids (§5.2-5.3).

The expected tables are written out literally from the reference so these tests run without
`../shared/`; when the published files are present they are checked too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.http.statuses import HTTP_STATUS, http_status
from jobstream.lifecycle.identity import derive_job_id
from jobstream.protocol.errors import (
    REASON_TO_CODE,
    RETRYABLE,
    ErrorCode,
    ErrorKind,
    ProtocolError,
    Reason,
    code_for_reason,
    invalid_params,
)
from jobstream.protocol.events import (
    JOB_NUMBER_DIGITS,
    KIND_TO_TYPE,
    EventKind,
    EventType,
    event_id,
    job_number,
    parse_event_position,
    protocol_type,
)
from jobstream.store.keys import is_job_id
from tests.support.event_ids import parse_event_id
from tests.support.validation import validate_error

SHARED_PROTOCOL = Path(__file__).resolve().parents[3] / "shared" / "protocol" / "v1"
ERROR_MAPPING = SHARED_PROTOCOL / "error-mapping.json"
PUBLISHED_SCHEMA = SHARED_PROTOCOL / "protocol.schema.json"

# §3: code -> retryable default (16 codes, closed enum).
EXPECTED_RETRYABLE: dict[str, bool] = {
    "no_candidate": True,
    "source_error": True,
    "auth_error": False,
    "quota_exceeded": True,
    "resource_busy": True,
    "queued_too_long": True,
    "stalled_no_progress": True,
    "deadline_exceeded": True,
    "cancelled_by_consumer": False,
    "idempotency_conflict": False,
    "unsupported_protocol_version": False,
    "invalid_params": False,
    "delivery_failed": True,
    "delivery_rejected": False,
    "delivery_abandoned": True,
    "internal_error": False,
}

# §3: the 20-member internal TerminalReasonCode union and its total mapping.
EXPECTED_REASON_TO_CODE: dict[str, str] = {
    "no_candidate": "no_candidate",
    "duplicate_exhausted": "no_candidate",
    "filter_exhausted": "no_candidate",
    "download_timeout": "source_error",
    "download_failed": "source_error",
    "metadata_failed": "source_error",
    "remote_http_error": "source_error",
    "network_error": "source_error",
    "rate_limited": "quota_exceeded",
    "auth_failed": "auth_error",
    "delivery_failed": "delivery_failed",
    "telegram_failed": "delivery_failed",
    "telepost_rejected": "delivery_rejected",
    "delivery_abandoned": "delivery_abandoned",
    "cancelled_by_consumer": "cancelled_by_consumer",
    "queued_too_long": "queued_too_long",
    "stalled_no_heartbeat": "stalled_no_progress",
    "execution_timeout": "deadline_exceeded",
    "configuration_error": "internal_error",
    "internal_error": "internal_error",
}

# §5.2: the 17 known internal kinds; None = internal-only.
EXPECTED_KIND_TO_TYPE: dict[str, str | None] = {
    "job.requested": "job.accepted",
    "job.execution_started": "job.started",
    "job.progressed": "job.progress",
    "job.outcome_succeeded": "job.succeeded",
    "job.outcome_failed": "job.failed",
    "job.outcome_expired": "job.expired",
    "job.outcome_cancelled": "job.cancelled",
    "execution.summary": None,
    "delivery.duplicate": None,
    "media.fallback": None,
    "outbox.claimed": None,
    "outbox.deferred": None,
    "outbox.delivered": None,
    "outbox.retry_scheduled": None,
    "outbox.dead": None,
    "outbox.cancelled": None,
    "outbox.replay_requested": None,
}

EXPECTED_EVENT_TYPES = {
    "job.accepted",
    "job.started",
    "job.progress",
    "job.succeeded",
    "job.failed",
    "job.expired",
    "job.cancelled",
}


def _published(path: Path) -> Any:
    if not path.exists():
        pytest.skip(f"{path.name} is not available (../shared/ missing)")
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------
# The code enum and its retryable defaults


def test_there_are_exactly_sixteen_codes_with_the_reference_defaults() -> None:
    assert len(ErrorCode) == 16
    assert {code.value for code in ErrorCode} == set(EXPECTED_RETRYABLE)
    assert {code.value: flag for code, flag in RETRYABLE.items()} == EXPECTED_RETRYABLE
    assert all(type(flag) is bool for flag in RETRYABLE.values())
    assert {code.value: code.retryable for code in ErrorCode} == EXPECTED_RETRYABLE


def test_codes_equal_the_published_error_mapping() -> None:
    mapping = _published(ERROR_MAPPING)
    published = mapping["protocol_codes"]
    assert set(published) == {code.value for code in ErrorCode}
    for code in ErrorCode:
        assert type(published[code.value]["retryable"]) is bool
        assert RETRYABLE[code] is published[code.value]["retryable"], code
    # The literal table above is itself the published one.
    assert {name: entry["retryable"] for name, entry in published.items()} == EXPECTED_RETRYABLE


def test_codes_equal_the_published_schema_enum() -> None:
    schema = _published(PUBLISHED_SCHEMA)
    enum = schema["$defs"]["Error"]["properties"]["code"]["enum"]
    assert sorted(enum) == sorted(code.value for code in ErrorCode)


# --------------------------------------------------------------------------------------------
# The reason table


def test_the_reason_table_covers_exactly_the_twenty_reasons() -> None:
    assert len(Reason) == 20
    assert {reason.value for reason in Reason} == set(EXPECTED_REASON_TO_CODE)
    assert set(REASON_TO_CODE) == set(Reason)
    assert {reason.value: code.value for reason, code in REASON_TO_CODE.items()} == (
        EXPECTED_REASON_TO_CODE
    )


def test_the_reason_table_equals_producer_internal() -> None:
    mapping = _published(ERROR_MAPPING)
    internal = {
        name: code
        for name, code in mapping["producer_internal"].items()
        if not name.startswith("$")
    }
    assert internal == {reason.value: code.value for reason, code in REASON_TO_CODE.items()}
    assert set(internal.values()) <= set(mapping["protocol_codes"])
    assert internal == EXPECTED_REASON_TO_CODE


@pytest.mark.parametrize(("reason", "code"), sorted(EXPECTED_REASON_TO_CODE.items()))
def test_every_reason_maps_to_its_code(reason: str, code: str) -> None:
    assert code_for_reason(reason) == code
    assert code_for_reason(reason) is ErrorCode(code)


@pytest.mark.parametrize(
    "reason",
    [None, "", "nope", "NO_CANDIDATE", " no_candidate", "stalled_no_progress", "deadline_exceeded"],
)
def test_unknown_or_absent_reasons_map_to_internal_error(reason: str | None) -> None:
    # Protocol codes that are not internal reasons (stalled_no_progress, deadline_exceeded) are
    # unknown reasons too: the table translates, it never passes strings through.
    assert code_for_reason(reason) is ErrorCode.INTERNAL_ERROR


def test_codes_never_produced_by_a_reason() -> None:
    produced = set(REASON_TO_CODE.values())
    assert ErrorCode.RESOURCE_BUSY not in produced
    assert ErrorCode.IDEMPOTENCY_CONFLICT not in produced
    assert ErrorCode.UNSUPPORTED_PROTOCOL_VERSION not in produced
    assert ErrorCode.INVALID_PARAMS not in produced


# --------------------------------------------------------------------------------------------
# ProtocolError and its body


def test_error_body_without_detail() -> None:
    error = ProtocolError(ErrorCode.INVALID_PARAMS, "unknown job", kind=ErrorKind.NOT_FOUND)
    body = error.body()
    assert body == {
        "error": {"code": "invalid_params", "message": "unknown job", "retryable": False}
    }
    assert list(body["error"]) == ["code", "message", "retryable"]
    assert http_status(error) == 404
    assert error.code is ErrorCode.INVALID_PARAMS
    assert error.message == "unknown job"
    assert error.detail is None
    validate_error(body)
    json.dumps(body)


def test_error_body_with_detail() -> None:
    detail = {"reason": "unknown_job", "job_id": "j-1"}
    error = ProtocolError(
        ErrorCode.INVALID_PARAMS, "unknown job", kind=ErrorKind.NOT_FOUND, detail=detail
    )
    assert error.body() == {
        "error": {
            "code": "invalid_params",
            "message": "unknown job",
            "retryable": False,
            "detail": {"reason": "unknown_job", "job_id": "j-1"},
        }
    }
    validate_error(error.body())


def test_an_empty_detail_is_still_sent() -> None:
    assert ProtocolError(ErrorCode.INTERNAL_ERROR, "x", detail={}).body()["error"]["detail"] == {}


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_code_sends_its_retryable_default(code: ErrorCode) -> None:
    body = ProtocolError(code, "m").body()
    assert body["error"]["code"] == code.value
    assert body["error"]["retryable"] is EXPECTED_RETRYABLE[code.value]
    validate_error(body)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ErrorCode.INVALID_PARAMS, 400),
        (ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, 400),
        (ErrorCode.IDEMPOTENCY_CONFLICT, 409),
        (ErrorCode.AUTH_ERROR, 401),
        (ErrorCode.QUOTA_EXCEEDED, 429),
        (ErrorCode.RESOURCE_BUSY, 503),
        (ErrorCode.INTERNAL_ERROR, 500),
        (ErrorCode.NO_CANDIDATE, 400),
    ],
)
def test_request_error_default_statuses(code: ErrorCode, status: int) -> None:
    # §3 table: HTTP uses of the request-error codes.
    assert http_status(ProtocolError(code, "m")) == status


def test_an_explicit_kind_wins() -> None:
    unavailable = ProtocolError(ErrorCode.INTERNAL_ERROR, "m", kind=ErrorKind.UNAVAILABLE)
    assert http_status(unavailable) == 503
    conflict = ProtocolError(ErrorCode.INVALID_PARAMS, "m", kind=ErrorKind.CONFLICT)
    assert http_status(conflict) == 409


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (ErrorKind.INVALID, 400),
        (ErrorKind.UNAUTHENTICATED, 401),
        (ErrorKind.NOT_FOUND, 404),
        (ErrorKind.CONFLICT, 409),
        (ErrorKind.TOO_LARGE, 413),
        (ErrorKind.UNSUPPORTED_MEDIA_TYPE, 415),
        (ErrorKind.TOO_MANY_REQUESTS, 429),
        (ErrorKind.INTERNAL, 500),
        (ErrorKind.UNAVAILABLE, 503),
    ],
)
def test_the_status_table_answers_each_kind(kind: ErrorKind, status: int) -> None:
    assert HTTP_STATUS[kind] == status
    assert http_status(invalid_params("m", kind=kind)) == status


def test_the_status_table_names_every_kind_once() -> None:
    assert set(HTTP_STATUS) == set(ErrorKind)
    assert len(set(HTTP_STATUS.values())) == len(ErrorKind)


def test_invalid_params_helper() -> None:
    error = invalid_params(
        "ambiguous target", kind=ErrorKind.CONFLICT, detail={"reason": "ambiguous_target"}
    )
    assert isinstance(error, ProtocolError)
    assert error.code is ErrorCode.INVALID_PARAMS
    assert http_status(error) == 409
    assert error.body()["error"] == {
        "code": "invalid_params",
        "message": "ambiguous target",
        "retryable": False,
        "detail": {"reason": "ambiguous_target"},
    }
    assert http_status(invalid_params("x")) == 400
    assert str(invalid_params("visible message")) == "visible message"


# --------------------------------------------------------------------------------------------
# Event kinds -> protocol types (§5.2)


def test_the_seventeen_known_kinds_are_all_mapped() -> None:
    assert len(EventKind) == 17
    assert len(KIND_TO_TYPE) == 17
    assert set(KIND_TO_TYPE) == set(EventKind)
    assert {kind.value: (t.value if t else None) for kind, t in KIND_TO_TYPE.items()} == (
        EXPECTED_KIND_TO_TYPE
    )


def test_the_projected_set_is_exactly_the_seven_lifecycle_kinds() -> None:
    projected = {kind.value for kind, event_type in KIND_TO_TYPE.items() if event_type is not None}
    assert projected == {
        "job.requested",
        "job.execution_started",
        "job.progressed",
        "job.outcome_succeeded",
        "job.outcome_failed",
        "job.outcome_expired",
        "job.outcome_cancelled",
    }
    assert all(kind.startswith("job.") for kind in projected)
    hidden = {kind.value for kind, event_type in KIND_TO_TYPE.items() if event_type is None}
    assert not any(kind.startswith("job.") for kind in hidden)
    assert len(hidden) == 10


def test_every_protocol_type_is_reachable_exactly_once() -> None:
    reached = [event_type for event_type in KIND_TO_TYPE.values() if event_type is not None]
    assert {event_type.value for event_type in reached} == EXPECTED_EVENT_TYPES
    assert len(reached) == len(set(reached)) == 7
    assert {event_type.value for event_type in EventType} == EXPECTED_EVENT_TYPES


def test_event_types_equal_the_published_schema_enum() -> None:
    schema = _published(PUBLISHED_SCHEMA)
    assert set(schema["$defs"]["Event"]["properties"]["type"]["enum"]) == EXPECTED_EVENT_TYPES


@pytest.mark.parametrize(("kind", "expected"), sorted(EXPECTED_KIND_TO_TYPE.items()))
def test_protocol_type_of_known_kinds(kind: str, expected: str | None) -> None:
    result = protocol_type(kind)
    if expected is None:
        assert result is None
    else:
        assert result is EventType(expected)
        assert result == expected


@pytest.mark.parametrize(
    "kind",
    [
        "job.brand_new_thing",
        "totally.unmapped",
        "",
        "JOB.REQUESTED",
        "job.requested ",
        # protocol type names are not internal kinds: no passthrough
        "job.accepted",
        "job.started",
        "job.succeeded",
        "job.failed",
        "job.cancelled",
        "job.expired",
        "schedule.triggered",
    ],
)
def test_unknown_kinds_map_to_nothing(kind: str) -> None:
    assert protocol_type(kind) is None
    assert KIND_TO_TYPE.get(kind) is None  # type: ignore[call-overload]


# --------------------------------------------------------------------------------------------
# Event ids (§5.3; ours: evt-<at>-<sequence><job number>)

# What the reference conformance checklist checks of every event id.
EVENT_ID_SHAPE = re.compile(r"^evt-[0-9]+-[0-9]+$")
JOB = derive_job_id("acme", "key-1")
OTHER_JOB = derive_job_id("acme", "key-2")
NUMBER = f"{job_number(JOB):0{JOB_NUMBER_DIGITS}d}"


@pytest.mark.parametrize(
    ("at", "sequence"),
    [(0, 1), (1, 1), (1_790_481_174_000, 1), (1_790_481_174_570, 7), (999, 123_456)],
)
def test_event_id_round_trip(at: int, sequence: int) -> None:
    value = event_id(JOB, at, sequence)
    assert value == f"evt-{at}-{sequence}{NUMBER}"
    assert EVENT_ID_SHAPE.fullmatch(value)
    assert parse_event_position(value, JOB) == (at, sequence)
    assert parse_event_id(value, JOB) == sequence


@given(
    st.text(min_size=1, max_size=40),
    st.integers(min_value=0, max_value=10**15),
    st.integers(min_value=1, max_value=10**9),
)
def test_event_id_round_trip_property(key: str, at: int, sequence: int) -> None:
    job_id = derive_job_id("acme", key)
    value = event_id(job_id, at, sequence)
    assert EVENT_ID_SHAPE.fullmatch(value)
    assert parse_event_position(value, job_id) == (at, sequence)


@given(st.from_regex(r"[a-z0-9][a-z0-9_-]{0,62}", fullmatch=True), st.text(min_size=1))
def test_every_job_id_is_shaped_like_one(tenant: str, key: str) -> None:
    job_id = derive_job_id(tenant, key)
    assert is_job_id(job_id)
    assert not is_job_id(job_id + "x")
    assert not is_job_id(job_id[:-1])


def test_event_ids_are_distinct_per_position_and_per_job() -> None:
    ids = {
        event_id(job_id, at, sequence)
        for job_id in (JOB, OTHER_JOB)
        for at in (1000, 2000)
        for sequence in (1, 2, 3, 12, 123)
    }
    assert len(ids) == 20


@given(st.text(max_size=20), st.text(max_size=20), st.integers(min_value=1, max_value=10**6))
def test_two_jobs_never_share_an_event_id(key: str, other_key: str, sequence: int) -> None:
    """Jobs active in the same millisecond get distinct ids at every position (issue 13 #4)."""
    job_id, other_id = derive_job_id("acme", key), derive_job_id("globex", other_key)
    at = 1_790_481_174_000
    assert event_id(job_id, at, sequence) != event_id(other_id, at, sequence)
    # Different positions of the two jobs cannot meet either: the job's number is fixed-width.
    assert event_id(job_id, at, sequence) != event_id(other_id, at, sequence + 1)
    assert parse_event_position(event_id(other_id, at, sequence), job_id) is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        "evt",
        "evt-",
        "evt-1",
        "evt-1-",
        "evt--1",
        "evt-a-1",
        "evt-1-a",
        "EVT-1-1",
        "Evt-1-1",
        "evt_1_1",
        "evt-1-1 ",
        " evt-1-1",
        "evt-1-1\n",
        "evt-1-1-1",
        "evt-1.0-1",
        "evt-1-1.0",
        "evt-1-+1",
        "evt-+1-1",
        "evt--1-1",
        "evt-1--1",
        "evt-1-0x1",
        "evt-1790481174570-c78dd065",  # the fixtures' shape is not ours
        "evt-1790481174570-a1b2c3",
        "job-1-1",
        "1-1",
        "evt-1-\u0663",  # ARABIC-INDIC DIGIT THREE: not a digit for ^evt-(\d+)-(\d+)$ in JS
        "evt-\u0661-1",
        "evt-1-\uff11",  # FULLWIDTH DIGIT ONE
        "evt-1-\u0967",  # DEVANAGARI DIGIT ONE
        "evt-1-1",  # the old shape, without a job's number
        "evt-1790481174570-3",
        f"evt-1-1{NUMBER} ",
        f"evt-1-\u0663{NUMBER}",
        f"evt-1-1{NUMBER[:-1]}",  # one digit short of the job's number
        f"evt-1-1{NUMBER}0",  # one digit over: the job's number would be another
        f"evt-1-1{NUMBER[:-1]}\uff11",
    ],
)
def test_malformed_event_ids_are_not_recognised(value: str) -> None:
    assert parse_event_id(value, JOB) is None


@pytest.mark.parametrize(
    "value", [f"evt-1-0{NUMBER}", f"evt-0-0{NUMBER}", f"evt-1790481174570-000{NUMBER}"]
)
def test_sequence_zero_is_not_an_event(value: str) -> None:
    assert parse_event_id(value, JOB) is None


@given(st.text(max_size=30))
def test_parse_event_id_only_accepts_ascii_shaped_ids(value: str) -> None:
    for candidate in (value, value + NUMBER):
        sequence = parse_event_id(candidate, JOB)
        if sequence is not None:
            assert EVENT_ID_SHAPE.fullmatch(candidate), candidate
            assert sequence >= 1


@pytest.mark.parametrize(
    "value",
    [
        f"evt-01790481174570-2{NUMBER}",
        f"evt-1790481174570-02{NUMBER}",
        f"evt-00-1{NUMBER}",
        f"evt-0001-0001{NUMBER}",
    ],
)
def test_only_canonical_ids_name_an_event(value: str) -> None:
    """Ids we issue have no leading zeros; a padded copy of one names no event (I4)."""
    assert parse_event_id(value, JOB) is None


@given(st.text(alphabet="evt-0123456789", max_size=24))
def test_a_parsed_id_is_exactly_the_id_of_its_position(prefix: str) -> None:
    for value in (prefix, prefix + NUMBER):
        position = parse_event_position(value, JOB)
        if position is not None:
            assert event_id(JOB, *position) == value
