"""Our own schemas: schemas/jobstream.schema.json (documents) and schemas/openapi.yaml (HTTP API).

They must be well formed, accept every published example document and everything our builders
produce, stay open to unknown fields on protocol objects, and still reject what is really wrong.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from jobstream.config.targets import Target, TargetsFile
from jobstream.domain import JobRecord, StoredEvent
from jobstream.http.caching import private_max_age, weak_etag
from jobstream.jobtypes import registry
from jobstream.protocol import documents
from jobstream.protocol.errors import ErrorCode, ErrorKind, ProtocolError, Reason, invalid_params
from jobstream.protocol.events import EventKind, EventType
from jobstream.protocol.queries import JOB_STATUSES
from jobstream_local.template import Template
from tests.support import shown

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
JSON_SCHEMA = SCHEMAS / "jobstream.schema.json"
OPENAPI = SCHEMAS / "openapi.yaml"
SHARED_PROTOCOL = Path(__file__).resolve().parents[3] / "shared" / "protocol" / "v1"

SCHEMA_ID = "https://jobstream.invalid/schemas/jobstream.schema.json"
SCHEMA_FILE_REF = "./jobstream.schema.json#/$defs/"
EXPECTED_DEFS = frozenset(
    {
        "ProtocolVersion",
        "Labels",
        "Error",
        "Task",
        "Progress",
        "Job",
        "Event",
        "EventPayload",
        "JobPage",
        "EventPage",
        "AckRequest",
        "AckResult",
        "FeedPage",
        "FeedAckRequest",
        "FeedAck",
        "Delivery",
        "JobDeliveries",
        "CallbackPage",
        "RedriveRequest",
        "RedriveResult",
        "EndpointHealth",
        "EndpointList",
        "EnableEndpointRequest",
        "EnableEndpointResult",
        "Locator",
        "Asset",
        "MatchedTag",
        "Candidate",
        "JobTypeDeclaration",
        "Capabilities",
        "ErrorEnvelope",
        "JobReceipt",
    }
)
# RedriveRequest too: an unknown (misspelt) field must not redrive every dead callback.
CLOSED_DEFS = frozenset({"ErrorEnvelope", "JobReceipt", "RedriveRequest"})
FIXTURE_DEFS = {
    "task": "Task",
    "job": "Job",
    "event": "Event",
    "capabilities": "Capabilities",
    "jobpage": "JobPage",
    "eventpage": "EventPage",
    "ackresult": "AckResult",
}
HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})

NOW = 1_790_481_300_000
BASE_URL = "https://jobs.example.test"


# --- loading and validating -----------------------------------------------------------------


@cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(JSON_SCHEMA.read_text(encoding="utf-8"))
    return schema


@cache
def _registry() -> Registry:
    return Registry().with_resource(SCHEMA_ID, Resource.from_contents(_schema()))


@cache
def _validator(definition: str) -> Draft202012Validator:
    assert definition in _schema()["$defs"], f"no $defs/{definition}"
    return Draft202012Validator({"$ref": f"{SCHEMA_ID}#/$defs/{definition}"}, registry=_registry())


def _errors(document: Any, definition: str) -> list[str]:
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in _validator(definition).iter_errors(document)
    ]


def _assert_valid(document: Any, definition: str) -> None:
    errors = _errors(document, definition)
    assert not errors, f"{definition} rejected: {errors}"


def _assert_invalid(document: Any, definition: str) -> None:
    assert _errors(document, definition), f"{definition} accepted {document!r}"


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (json-pointer-ish path, node) below `node`, the node itself first."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}/{index}")


def _refs(node: Any) -> list[tuple[str, str]]:
    return [
        (path, child["$ref"])
        for path, child in _walk(node)
        if isinstance(child, dict) and isinstance(child.get("$ref"), str)
    ]


@pytest.fixture
def shared_protocol() -> Path:
    if not SHARED_PROTOCOL.is_dir():
        pytest.skip("the published protocol (../shared/protocol/v1) is not checked out here")
    return SHARED_PROTOCOL


def _fixture(shared: Path, name: str) -> Any:
    return json.loads((shared / "fixtures" / name).read_text(encoding="utf-8"))


# --- documents our builders produce ----------------------------------------------------------

RICH_RESULT: dict[str, Any] = {
    "candidates": [
        {
            "candidate_id": "cand-149713091",
            "platform": "pixiv",
            "work_id": "149713091",
            "work_type": "illustration",
            "url": "https://www.pixiv.net/artworks/149713091",
            "tags": [
                {"tag": "botefuku", "source": "seed", "weight": 1.0},
                {"tag": "related", "source": "related", "weight": 0.5},
            ],
            "assets": [
                {
                    "asset_id": "asset-149713091-p0",
                    "type": "image",
                    "role": "primary",
                    "source": "pixiv",
                    "quality": "custom",
                    "width": 1200,
                    "height": 1600,
                    "bytes": 842133,
                    "mime": "image/jpeg",
                    "hash": "sha256:00",
                    "locator": {"kind": "url", "value": "https://i.example.test/p0.jpg"},
                    "metadata": {"page": 0},
                }
            ],
            "metadata": {"title": "t"},
        }
    ],
    "scanned": 6,
    "filtered": [{"work_id": "149638093", "reason": "duplicate"}],
}


def _record(**changes: Any) -> JobRecord:
    base = JobRecord(
        job_id="acme_job-0a1b2c",
        tenant="acme",
        job_type="candidate_search",
        idempotency_key="key-1",
        params={},
        params_canonical="{}",
        target_id="bot1-illust-botefuku",
        status="queued",
        created_at=1_790_481_174_000,
        updated_at=1_790_481_174_000,
        deadline_at=1_790_482_374_000,
        event_count=1,
    )
    return replace(base, **changes)


def _records() -> dict[str, JobRecord]:
    started = 1_790_481_180_000
    running = {
        "status": "running",
        "started_at": started,
        "heartbeat_at": started + 1000,
        "updated_at": started + 1000,
        "lease_owner": "worker-1",
        "lease_expires_at": NOW + 60_000,
        "attempt": 1,
        "progress_stage": "searching",
        "event_count": 2,
    }
    ended = {
        **{key: value for key, value in running.items() if key != "status"},
        "lease_owner": None,
        "lease_expires_at": None,
        "event_count": 3,
    }
    return {
        "queued": _record(),
        "queued_bare": _record(deadline_at=None, correlation_id=None, labels=None),
        "queued_tagged": _record(correlation_id="chain:1", labels={"origin": "moderation"}),
        "running": _record(**running),
        "running_message": _record(**running, progress_message="scanned 3 works"),
        "running_lapsed_lease": _record(**{**running, "lease_expires_at": NOW - 1}),
        "succeeded": _record(**ended, status="succeeded", result=RICH_RESULT),
        "succeeded_without_result": _record(**ended, status="succeeded", result=None),
        "failed": _record(
            **ended, status="failed", reason=Reason.NO_CANDIDATE.value, reason_message="none"
        ),
        "failed_unknown_reason": _record(**ended, status="failed", reason="gremlins"),
        "failed_no_reason": _record(**ended, status="failed"),
        "cancelled": _record(
            status="cancelled", reason=Reason.CANCELLED_BY_CONSUMER.value, event_count=2
        ),
        "expired": _record(**ended, status="expired", reason=Reason.STALLED_NO_HEARTBEAT.value),
        "expired_deadline": _record(
            **ended, status="expired", reason=Reason.EXECUTION_TIMEOUT.value
        ),
    }


RECORDS = _records()
TERMINAL_KIND = {
    "succeeded": EventKind.OUTCOME_SUCCEEDED,
    "failed": EventKind.OUTCOME_FAILED,
    "cancelled": EventKind.OUTCOME_CANCELLED,
    "expired": EventKind.OUTCOME_EXPIRED,
}


def _stream(record: JobRecord) -> list[StoredEvent]:
    """Every stored kind (internal-only ones included) plus the terminal kind the status implies."""
    kinds: list[str] = [
        EventKind.REQUESTED,
        EventKind.EXECUTION_STARTED,
        EventKind.PROGRESSED,
        EventKind.EXECUTION_SUMMARY,
        EventKind.OUTBOX_DELIVERED,
        "job.from_the_future",
    ]
    if record.status in TERMINAL_KIND:
        kinds.append(TERMINAL_KIND[record.status])
    return [
        StoredEvent(record.job_id, sequence, str(kind), record.created_at + sequence)
        for sequence, kind in enumerate(kinds, start=1)
    ]


def _targets() -> TargetsFile:
    query = {"tags": ["botefuku"]}
    return TargetsFile(
        targets=[
            Target.model_validate(
                {"id": "a", "work_type": "illustration", "source": "catalog", "query": query}
            ),
            Target.model_validate(
                {"id": "b", "work_type": "novel", "source": "pixiv", "query": query}
                | {"timeout_ms": 1_200_000}
            ),
        ]
    )


# --- the JSON Schema itself ------------------------------------------------------------------


def test_schema_is_valid_draft_2020_12() -> None:
    schema = _schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_ID


def test_schema_defines_exactly_the_protocol_objects() -> None:
    # The protocol's objects, and the params and result schemas of every registered job type.
    job_type_defs = {name for job_type in registry.job_types() for name in job_type.schemas}
    assert {"CandidateSearchParams", "Result_CandidateSearch"} <= job_type_defs
    assert set(_schema()["$defs"]) == EXPECTED_DEFS | job_type_defs


def test_every_ref_is_local_and_resolves() -> None:
    refs = _refs(_schema())
    assert refs, "the schema is expected to reuse its definitions through $ref"
    resolver = _registry().resolver(base_uri=SCHEMA_ID)
    for path, ref in refs:
        assert ref.startswith("#/$defs/"), f"{path}: {ref} is not a local $defs reference"
        assert ref.removeprefix("#/$defs/") in _schema()["$defs"], f"{path}: {ref} names nothing"
        resolver.lookup(ref)  # raises if the pointer does not resolve


def test_protocol_objects_stay_open_to_unknown_fields() -> None:
    for name, definition in _schema()["$defs"].items():
        for path, node in _walk(definition):
            if not isinstance(node, dict):
                continue
            closes = node.get("additionalProperties") is False or "unevaluatedProperties" in node
            if name in CLOSED_DEFS and path == "":
                assert node.get("additionalProperties") is False, f"{name} must be closed"
            else:
                assert not closes, f"$defs/{name}{path} restricts unknown properties"


@pytest.mark.parametrize(("definition", "key"), [("ErrorEnvelope", "error"), ("JobReceipt", "job")])
def test_envelopes_have_exactly_one_key(definition: str, key: str) -> None:
    envelope = _schema()["$defs"][definition]
    assert envelope["required"] == [key]
    assert set(envelope["properties"]) == {key}


def test_closed_vocabularies_match_the_code() -> None:
    defs = _schema()["$defs"]
    codes = defs["Error"]["properties"]["code"]["enum"]
    assert len(codes) == 16
    assert set(codes) == {code.value for code in ErrorCode}
    assert set(defs["Event"]["properties"]["type"]["enum"]) == {kind.value for kind in EventType}
    assert set(defs["Job"]["properties"]["status"]["enum"]) == set(JOB_STATUSES)
    features = defs["JobTypeDeclaration"]["properties"]["features"]["items"]["enum"]
    assert set(documents.FEATURES) <= set(features)


# --- against the published protocol ---------------------------------------------------------


def test_every_published_fixture_validates(shared_protocol: Path) -> None:
    files = sorted((shared_protocol / "fixtures").glob("*.json"))
    assert files, "the published fixtures are missing"
    failures: dict[str, list[str]] = {}
    for path in files:
        prefix = path.name.split(".", 1)[0]
        assert prefix in FIXTURE_DEFS, f"no definition is known for fixture {path.name}"
        errors = _errors(json.loads(path.read_text(encoding="utf-8")), FIXTURE_DEFS[prefix])
        if errors:
            failures[path.name] = errors
    assert not failures


def test_every_published_def_exists_here(shared_protocol: Path) -> None:
    published = json.loads((shared_protocol / "protocol.schema.json").read_text(encoding="utf-8"))
    missing = set(published["$defs"]) - set(_schema()["$defs"])
    assert not missing


def test_we_require_at_least_what_the_protocol_requires(shared_protocol: Path) -> None:
    published = json.loads((shared_protocol / "protocol.schema.json").read_text(encoding="utf-8"))
    ours = _schema()["$defs"]
    for name, definition in published["$defs"].items():
        looser = set(definition.get("required", [])) - set(ours[name].get("required", []))
        assert not looser, f"{name} no longer requires {looser}"


def test_job_fixture_with_unknown_fields_still_validates(shared_protocol: Path) -> None:
    job = _fixture(shared_protocol, "job.succeeded.candidate_search.json")
    job["x_future"] = {"anything": [1, 2]}
    job["progress"]["x_future"] = True
    job["result"]["x_future"] = "more"
    candidate = job["result"]["candidates"][0]
    candidate["x_future"] = 1
    candidate["tags"][0]["x_future"] = None
    candidate["assets"][0]["locator"]["x_future"] = "deep"
    job["result"]["filtered"][0]["x_future"] = 0
    _assert_valid(job, "Job")
    _assert_valid({"job": job}, "JobReceipt")


# --- everything we produce -------------------------------------------------------------------


@pytest.mark.parametrize("base_url", [None, BASE_URL])
@pytest.mark.parametrize("state", sorted(RECORDS))
def test_produced_jobs_validate(state: str, base_url: str | None) -> None:
    record = RECORDS[state]
    _assert_valid(shown.job_document(record, NOW, base_url), "Job")
    _assert_valid(shown.submission(record, NOW, base_url), "JobReceipt")
    if record.status == "succeeded":
        _assert_valid(shown.job_document(record, NOW)["result"], "Result_CandidateSearch")
    if record.is_terminal and record.status != "succeeded":
        _assert_valid({"error": documents.job_error(record)}, "ErrorEnvelope")


@pytest.mark.parametrize("state", sorted(RECORDS))
def test_produced_events_and_pages_validate(state: str) -> None:
    record = RECORDS[state]
    stream = _stream(record)
    produced = [shown.event_document(record, event, NOW, BASE_URL) for event in stream]
    events = [event for event in produced if event is not None]
    assert len(events) >= 3
    for event in events:
        _assert_valid(event, "Event")
        _assert_valid(event["payload"], "EventPayload")
    for has_more in (False, True):
        page = shown.event_page(record, stream, has_more=has_more, now=NOW, base_url=BASE_URL)
        _assert_valid(page, "EventPage")
    _assert_valid(shown.event_page(record, [], has_more=False, now=NOW), "EventPage")
    for acked in (0, 1, record.event_count):
        _assert_valid(documents.ack_result(replace(record, ack_sequence=acked), NOW), "AckResult")


def test_produced_job_pages_validate() -> None:
    records = list(RECORDS.values())
    _assert_valid(shown.job_page(records, next_cursor="opaque", now=NOW), "JobPage")
    _assert_valid(shown.job_page([], next_cursor=None, now=NOW, base_url=BASE_URL), "JobPage")


def test_produced_capabilities_validate() -> None:
    for targets in (_targets(), TargetsFile(targets=[])):
        document = documents.capabilities(
            job_types=registry.job_types(),
            queued_timeout_ms=1_800_000,
            stall_timeout_ms=900_000,
            heartbeat_interval_ms=30_000,
            default_deadline_ms=targets.longest_ceiling_ms(5_400_000),
            now=NOW,
        )
        _assert_valid(document, "Capabilities")
        declaration = document["job_types"][0]
        # The pointers we advertise name definitions of the protocol schema (and of ours).
        for key in ("params_schema", "result_schema"):
            assert declaration[key].removeprefix("#/$defs/") in _schema()["$defs"]


@pytest.mark.parametrize("code", list(ErrorCode))
def test_produced_error_envelopes_validate(code: ErrorCode) -> None:
    _assert_valid(ProtocolError(code, "something").body(), "ErrorEnvelope")
    _assert_valid(ProtocolError(code, "x", detail={"field": "f"}).body(), "ErrorEnvelope")


def test_request_errors_validate() -> None:
    _assert_valid(
        invalid_params("no", kind=ErrorKind.TOO_LARGE, detail={"limit_bytes": 1}).body(),
        "ErrorEnvelope",
    )


# --- what must be rejected -------------------------------------------------------------------


def _job() -> dict[str, Any]:
    return shown.job_document(RECORDS["running_message"], NOW, BASE_URL)


def test_error_with_unknown_code_is_rejected() -> None:
    error = {"code": "internal_error", "message": "boom", "retryable": False}
    _assert_valid(error, "Error")
    _assert_invalid({**error, "code": "rate_limited"}, "Error")
    _assert_invalid({**error, "code": "INTERNAL_ERROR"}, "Error")
    _assert_invalid({"error": {**error, "code": "unauthorized"}}, "ErrorEnvelope")


def test_error_envelope_with_a_second_key_is_rejected() -> None:
    envelope = {"error": {"code": "auth_error", "message": "no", "retryable": False}}
    _assert_valid(envelope, "ErrorEnvelope")
    _assert_invalid({**envelope, "status": "error"}, "ErrorEnvelope")
    _assert_invalid({}, "ErrorEnvelope")


def test_job_submission_with_a_second_key_is_rejected() -> None:
    submission = {"job": _job()}
    _assert_valid(submission, "JobReceipt")
    _assert_invalid({**submission, "replayed": True}, "JobReceipt")
    _assert_invalid(_job(), "JobReceipt")


@pytest.mark.parametrize(
    "change",
    [
        {"status": "done"},
        {"protocol_version": 1},
        {"job_id": ""},
        {"created_at": -1},
        {"updated_at": 1.5},
        {"started_at": "soon"},
        {"heartbeat_at": -5},
        {"lease_active": "yes"},
        {"attempt": -1},
        {"labels": {"tenant": 1}},
        {"progress": {"message": "no stage"}},
        {"error": {"code": "internal_error", "message": "still running?", "retryable": False}},
        {"result": {"candidates": [], "scanned": 0}},
    ],
    ids=lambda change: next(iter(change)),
)
def test_broken_jobs_are_rejected(change: dict[str, Any]) -> None:
    _assert_invalid({**_job(), **change}, "Job")


def test_outcome_fields_follow_the_status() -> None:
    succeeded = shown.job_document(RECORDS["succeeded"], NOW)
    failed = shown.job_document(RECORDS["failed"], NOW)
    _assert_invalid({**succeeded, "error": failed["error"]}, "Job")
    _assert_invalid({**failed, "result": succeeded["result"]}, "Job")
    _assert_invalid({**succeeded, "result": {"candidates": [{"platform": "pixiv"}]}}, "Job")
    # Another job type's result is not held to the candidate_search shape.
    _assert_valid({**succeeded, "job_type": "other", "result": {"anything": 1}}, "Job")


def test_broken_events_are_rejected() -> None:
    record = RECORDS["succeeded"]
    events = [shown.event_document(record, event, NOW) for event in _stream(record)]
    terminal = next(event for event in events if event and event["type"] == "job.succeeded")
    accepted = next(event for event in events if event and event["type"] == "job.accepted")
    _assert_valid(terminal, "Event")
    _assert_invalid({**terminal, "type": "job.done"}, "Event")
    _assert_invalid({**terminal, "event_id": ""}, "Event")
    _assert_invalid({**terminal, "at": -1}, "Event")
    _assert_invalid({key: value for key, value in terminal.items() if key != "payload"}, "Event")
    _assert_invalid({**accepted, "payload": {"error": {"code": "no_candidate"}}}, "Event")
    failed = {**terminal, "type": "job.failed", "payload": {"detail": {}}}
    _assert_invalid(failed, "Event")


def test_pages_and_acks_are_checked() -> None:
    _assert_invalid({"job_id": "j", "events": [], "unacked": -1, "server_time": NOW}, "EventPage")
    _assert_invalid({"job_id": "j", "events": [{}], "unacked": 0, "server_time": NOW}, "EventPage")
    _assert_invalid({"jobs": [{"job_id": "j"}], "server_time": NOW}, "JobPage")
    _assert_invalid({"job_id": "j", "acked": -1, "unacked": 0, "server_time": NOW}, "AckResult")
    _assert_valid({"ack_through": "evt-1-1"}, "AckRequest")
    _assert_invalid({"ack_through": ""}, "AckRequest")
    _assert_invalid({}, "AckRequest")


def test_tasks_and_candidate_search_params_are_checked() -> None:
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "k",
        "params": {},
    }
    _assert_valid(task, "Task")
    _assert_valid({}, "CandidateSearchParams")
    _assert_valid({"target_id": "t", "x_future": 1}, "CandidateSearchParams")
    bad_params = [
        {"query": {"tags": []}},
        {"query": {"expand": True}},
        {"source": {"platform": "twitter"}},
        {"constraints": {"exclude": [{"kind": "artist", "id": "1"}]}},
        {"constraints": {"exclude": [{"kind": "work"}]}},
        {"constraints": {"limit": 0}},
        {"constraints": {"scan_limit": 0}},
        {"constraints": {"work_types": "illustration"}},
    ]
    for params in bad_params:
        _assert_invalid(params, "CandidateSearchParams")
        _assert_invalid({**task, "params": params}, "Task")
    _assert_invalid({**task, "protocol_version": 1}, "Task")
    _assert_invalid({**task, "idempotency_key": ""}, "Task")
    _assert_invalid({**task, "deadline_ms": 999}, "Task")
    _assert_invalid({key: value for key, value in task.items() if key != "params"}, "Task")


def test_result_assets_are_checked() -> None:
    result = copy.deepcopy(RICH_RESULT)
    _assert_valid(result, "Result_CandidateSearch")
    asset = result["candidates"][0]["assets"][0]
    for key, value in [
        ("quality", "hd"),
        ("locator", {"kind": "ftp", "value": "x"}),
        ("bytes", -1),
    ]:
        _assert_invalid({**asset, key: value}, "Asset")
    _assert_invalid(
        {**result, "filtered": [{"work_id": "1", "reason": "boring"}]}, "Result_CandidateSearch"
    )
    _assert_invalid({"candidates": []}, "Result_CandidateSearch")


# --- the OpenAPI document ---------------------------------------------------------------------

# The status of an answer without a body (a 304), in EXPECTED_OPERATIONS.
NO_BODY = ""
EXPECTED_OPERATIONS: dict[tuple[str, str], dict[str, str | None]] = {
    # (path, method): {status: schema the body is, None for "an ErrorEnvelope", NO_BODY}
    ("/capabilities", "get"): {"200": "Capabilities", "304": NO_BODY},
    ("/jobs", "post"): {
        "202": "JobReceipt",
        "200": "JobReceipt",
        "400": None,
        "404": None,
        "409": None,
        "413": None,
        "415": None,
        "429": None,
    },
    ("/jobs", "get"): {"200": "JobPage", "400": None},
    ("/jobs/{job_id}", "get"): {"200": "Job", "404": None},
    ("/jobs/{job_id}/cancel", "post"): {"200": "Job", "404": None},
    ("/jobs/{job_id}/events", "get"): {"200": "EventPage", "400": None, "404": None},
    ("/jobs/{job_id}/events/ack", "post"): {
        "200": "AckResult",
        "400": None,
        "404": None,
        "413": None,
        "415": None,
    },
    ("/events", "get"): {"200": "FeedPage", "400": None},
    ("/jobs/{job_id}/callbacks", "get"): {"200": "JobDeliveries", "404": None},
    ("/callbacks", "get"): {"200": "CallbackPage", "400": None},
    ("/callbacks/endpoints", "get"): {"200": "EndpointList"},
    ("/callbacks/endpoints/enable", "post"): {
        "200": "EnableEndpointResult",
        "400": None,
        "413": None,
        "415": None,
    },
    ("/callbacks/redrive", "post"): {
        "200": "RedriveResult",
        "400": None,
        "404": None,
        "413": None,
        "415": None,
    },
    ("/events/ack", "post"): {"200": "FeedAck", "400": None, "413": None, "415": None},
}


@cache
def _openapi() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))
    return document


def _local(ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = _openapi()
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _follow(node: dict[str, Any]) -> dict[str, Any]:
    """Follow local `#/...` references until a node that is not one."""
    while isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        node = _local(node["$ref"])
    return node


def _def_named(schema: dict[str, Any]) -> str | None:
    """The $defs name a (possibly indirect) schema reference lands on, if any."""
    schema = _follow(schema)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(SCHEMA_FILE_REF):
        return ref.removeprefix(SCHEMA_FILE_REF)
    for part in schema.get("allOf", []):
        if (name := _def_named(part)) is not None:
            return name
    return None


def _operations() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (path, method): operation
        for path, item in _openapi()["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    }


def _response_schema(operation: dict[str, Any], status: str) -> dict[str, Any]:
    responses = operation["responses"]
    assert status in responses, f"no {status} response"
    response = _follow(responses[status])
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


def test_openapi_document_parses() -> None:
    document = _openapi()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"]
    assert document["info"]["version"]
    assert len(document["info"]["description"].strip()) > 40


# Answered without authentication: the document itself and the console's files.
PUBLIC_OPERATIONS = {
    ("/openapi.json", "get"),
    ("/console", "get"),
    ("/console/{proxy+}", "get"),
}


def test_openapi_declares_exactly_our_routes() -> None:
    assert set(_operations()) == set(EXPECTED_OPERATIONS) | PUBLIC_OPERATIONS


def test_the_public_operation_needs_no_token() -> None:
    for key in PUBLIC_OPERATIONS:
        assert _operations()[key]["security"] == []


def test_openapi_routes_match_the_template() -> None:
    routes = {
        (route.path, route.method.lower())
        for route in Template.load().http_routes()
        if route.path != "$default"
    }
    assert routes == set(_operations())


def test_openapi_refs_name_existing_defs_and_components() -> None:
    refs = _refs(_openapi())
    external = [ref for _, ref in refs if ref.startswith(SCHEMA_FILE_REF)]
    assert external, "component schemas are expected to point into jobstream.schema.json"
    for path, ref in refs:
        if ref.startswith("#/"):
            _local(ref)  # raises KeyError when the target is missing
            continue
        assert ref.startswith(SCHEMA_FILE_REF), f"{path}: unexpected reference {ref}"
        assert ref.removeprefix(SCHEMA_FILE_REF) in _schema()["$defs"], f"{path}: {ref}"
    named = {ref.removeprefix(SCHEMA_FILE_REF) for ref in external}
    assert named == EXPECTED_DEFS


@pytest.mark.parametrize(("path", "method"), sorted(EXPECTED_OPERATIONS))
def test_openapi_operation_contract(path: str, method: str) -> None:
    operation = _operations()[(path, method)]
    schemes = _openapi()["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    assert operation["security"] == [{"bearerAuth": []}]
    # Every authenticated route may answer a 503: a transient cause outlasted the retries
    # (`resource_busy`, with Retry-After) or the deployment is misconfigured.
    expected = {**EXPECTED_OPERATIONS[(path, method)], "401": None, "500": None, "503": None}
    assert set(operation["responses"]) == set(expected)
    for status, definition in expected.items():
        if definition == NO_BODY:
            assert "content" not in operation["responses"][status], status
            continue
        schema = _response_schema(operation, status)
        assert _def_named(schema) == (definition or "ErrorEnvelope"), status
    unauthorized = _follow(_response_schema(operation, "401"))
    pinned = [
        part["properties"]["error"]["properties"]["code"]
        for part in unauthorized.get("allOf", [])
        if "properties" in part
    ]
    assert pinned == [{"const": "auth_error"}]
    busy = _openapi()["components"]["responses"]["ServiceUnavailable"]
    assert busy["headers"]["Retry-After"]["schema"] == {"type": "integer", "minimum": 1}
    if "{job_id}" in path:
        parameters = [
            _follow(parameter)
            for parameter in _openapi()["paths"][path].get("parameters", [])
            + operation.get("parameters", [])
        ]
        assert {"name": "job_id", "in": "path", "required": True}.items() <= next(
            parameter for parameter in parameters if parameter["name"] == "job_id"
        ).items()


def _query_parameters(path: str, method: str) -> dict[str, dict[str, Any]]:
    operation = _operations()[(path, method)]
    return {
        parameter["name"]: parameter["schema"]
        for parameter in map(_follow, operation.get("parameters", []))
        if parameter["in"] == "query"
    }


def test_openapi_query_parameters() -> None:
    listing = _query_parameters("/jobs", "get")
    assert set(listing) == {"idempotency_key", "correlation_id", "status", "limit", "cursor"}
    assert listing["limit"] == {"type": "integer", "minimum": 1, "maximum": 500, "default": 100}
    assert set(listing["status"]["enum"]) == set(JOB_STATUSES)
    events = _query_parameters("/jobs/{job_id}/events", "get")
    assert set(events) == {"after", "unacked"}
    assert set(events["unacked"]["enum"]) == {"1", "0", "true", "false"}


def test_openapi_request_bodies() -> None:
    bodies = {
        key: _def_named(operation["requestBody"]["content"]["application/json"]["schema"])
        for key, operation in _operations().items()
        if "requestBody" in operation
    }
    assert bodies == {
        ("/jobs", "post"): "Task",
        ("/jobs/{job_id}/events/ack", "post"): "AckRequest",
        ("/events/ack", "post"): "FeedAckRequest",
        ("/callbacks/redrive", "post"): "RedriveRequest",
        ("/callbacks/endpoints/enable", "post"): "EnableEndpointRequest",
    }


def test_openapi_is_a_valid_openapi_3_1_document() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(_openapi(), base_uri=OPENAPI.resolve().as_uri())


def test_openapi_capabilities_declares_its_validator_and_lifetime() -> None:
    operation = _operations()[("/capabilities", "get")]
    parameters = [_follow(parameter) for parameter in operation["parameters"]]
    assert [(p["name"], p["in"], p["required"]) for p in parameters] == [
        ("If-None-Match", "header", False)
    ]
    for status in ("200", "304"):
        headers = {
            name: _follow(header)
            for name, header in operation["responses"][status]["headers"].items()
        }
        assert set(headers) == {"ETag", "Cache-Control", "Vary"}, status
        assert headers["Vary"]["schema"]["const"] == "Authorization"
        # The value the handler answers (tests/integration/test_capabilities_caching.py).
        assert headers["Cache-Control"]["schema"]["const"] == private_max_age(60)
        assert re.fullmatch(headers["ETag"]["schema"]["pattern"], weak_etag(b"{}"))
