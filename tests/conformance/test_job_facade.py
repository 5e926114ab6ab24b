"""protocol-reference §8, job facade items 8-29, against the local stack over HTTP.

Skipped items (they concern wiring we do not have):
- 20: the legacy `/internal/targets/{target}/refetch` shim; jobstream serves only the protocol.
- 26: manual-delivery wiring (`delivery_outcome_not_configured`); jobstream has no delivery targets.
- 28: legacy refetch after a generic job; no legacy shim (see 20).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.conformance._support import (
    MAIN_TARGETS,
    MULTI_TARGETS,
    NOVEL_TARGET,
    REFERENCE_TARGET,
    SLOW_TARGET,
    Client,
    Stack,
    canonical_task,
    key,
    now_ms,
    seg,
    types,
)
from tests.support.receiver import Receiver
from tests.support.validation import business_keys

pytestmark = [pytest.mark.stack, pytest.mark.xdist_group("conformance")]


def test_08_submit_answers_202_with_the_wrapped_queued_job(main: Client, sink: Receiver) -> None:
    idempotency_key = key("ref-08")
    before = now_ms()
    response = main.submit(canonical_task(idempotency_key, sink.url))
    assert response.status == 202
    assert list(response.body) == ["job"]
    job = response.body["job"]
    assert job["protocol_version"] == "1"
    assert job["job_type"] == "candidate_search"
    assert job["status"] == "queued"
    assert job["idempotency_key"] == idempotency_key
    assert job["correlation_id"] == "review-chain:135"
    assert isinstance(job["created_at"], int)
    assert isinstance(job["updated_at"], int)
    assert before - 5_000 <= job["created_at"] <= now_ms() + 5_000
    assert "refetch" not in job["job_id"]
    assert "slot_id" not in job


def test_09_get_job_equals_the_submitted_job(multi: Client) -> None:
    # The slow target: the job is still `queued` or just `running`; the fields fixed at
    # admission must equal the submitted job's.
    job = multi.admit(canonical_task(key("ref-09"), None, params={"target_id": SLOW_TARGET}))
    try:
        fetched = multi.job(job["job_id"])
        if fetched["status"] == "queued":
            assert fetched == job
        else:
            stable = ("job_id", "created_at", "deadline_at", "idempotency_key", "correlation_id")
            assert {k: fetched[k] for k in stable} == {k: job[k] for k in stable}
            assert fetched["labels"] == job["labels"]
    finally:
        multi.cancel(job["job_id"])


def test_09_get_job_equals_the_terminal_job_on_every_read(main: Client) -> None:
    job = main.admit(canonical_task(key("ref-09b"), None))
    terminal = main.wait_terminal(job["job_id"])
    assert main.job(job["job_id"]) == terminal


def test_10_list_by_idempotency_key(main: Client) -> None:
    idempotency_key = key("ref-10")
    job = main.admit(canonical_task(idempotency_key, None))
    page = main.jobs(idempotency_key=idempotency_key)
    assert [item["job_id"] for item in page["jobs"]] == [job["job_id"]]


def test_11_queued_job_has_no_start_and_no_lease(main: Client) -> None:
    # Workers pick jobs up within ~1 s: check the admission answer, which is queued by definition.
    job = main.admit(canonical_task(key("ref-11"), None))
    assert job["status"] == "queued"
    assert job["started_at"] is None
    assert job["lease_active"] is False
    assert isinstance(job["created_at"], int)
    assert isinstance(job["updated_at"], int)


def test_12_running_job_reports_lease_and_heartbeat(multi: Client) -> None:
    job = multi.admit(canonical_task(key("ref-12"), None, params={"target_id": SLOW_TARGET}))
    try:
        running = multi.wait_running(job["job_id"])
        now = now_ms()
        assert isinstance(running["started_at"], int)
        assert isinstance(running["heartbeat_at"], int)
        assert running["lease_active"] is True
        assert isinstance(running["lease_expires_at"], int)
        assert running["lease_expires_at"] > now
        assert running["lease_expires_at"] >= running["heartbeat_at"]
        assert running["progress"]["stage"] == "searching"
    finally:
        multi.cancel(job["job_id"])


def test_13_succeeded_job_carries_result_and_no_error(main: Client) -> None:
    job = main.admit(canonical_task(key("ref-13"), None))
    done = main.wait_terminal(job["job_id"])
    assert done["status"] == "succeeded", done
    assert isinstance(done["updated_at"], int)
    assert "error" not in done
    assert done["result"]["candidates"]


def test_14_replay_returns_the_same_job_and_records_nothing_new(main: Client) -> None:
    idempotency_key = key("ref-14")
    task = canonical_task(idempotency_key, None)
    job = main.admit(task)
    main.wait_terminal(job["job_id"])
    events = main.settled_events(job["job_id"])
    replay = main.submit(task)
    assert replay.status in (200, 202)
    assert replay.body["job"]["job_id"] == job["job_id"]
    assert len(main.jobs(idempotency_key=idempotency_key)["jobs"]) == 1
    # Nothing new is recorded for the replay: the stream is unchanged.
    assert main.events(job["job_id"])["events"] == events["events"]


def test_15_same_key_different_params_conflicts(main: Client) -> None:
    idempotency_key = key("ref-15")
    job = main.admit(canonical_task(idempotency_key, None))
    other = canonical_task(idempotency_key, None)
    other["params"]["query"]["tags"] = ["botefuku"]
    response = main.submit(other)
    assert response.status == 409
    assert response.body["error"]["code"] == "idempotency_conflict"
    assert response.body["error"]["retryable"] is False
    page = main.jobs(idempotency_key=idempotency_key)
    assert [item["job_id"] for item in page["jobs"]] == [job["job_id"]]


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"protocol_version": "2"}, 400, "unsupported_protocol_version"),
        ({"job_type": "video_upload"}, 400, "invalid_params"),
        ({"params": {"query": {"tags": []}}}, 400, "invalid_params"),
    ],
    ids=["protocol_version", "job_type", "empty_tags"],
)
def test_16_request_errors(main: Client, overrides: dict[str, Any], status: int, code: str) -> None:
    idempotency_key = key("ref-16")
    response = main.submit(canonical_task(idempotency_key, None, **overrides))
    assert response.status == status
    assert response.body["error"]["code"] == code
    assert response.body["error"]["retryable"] is False
    assert main.jobs(idempotency_key=idempotency_key)["jobs"] == []


def test_16_unknown_job_is_404(main: Client) -> None:
    response = main.call("GET", "/jobs/does-not-exist", schema="Job")
    assert response.status == 404
    assert response.body["error"]["code"] == "invalid_params"


def test_17_cancel_running_job(multi: Client) -> None:
    job = multi.admit(canonical_task(key("ref-17"), None, params={"target_id": SLOW_TARGET}))
    multi.wait_running(job["job_id"])
    response = multi.cancel(job["job_id"])
    assert response.status == 200
    cancelled = response.body
    assert "job" not in cancelled  # a bare Job
    assert cancelled["status"] == "cancelled"
    assert cancelled["error"]["code"] == "cancelled_by_consumer"
    assert cancelled["error"]["retryable"] is False
    assert cancelled["error"]["detail"]["internal_code"] == "cancelled_by_consumer"
    assert cancelled["lease_active"] is False
    again = multi.cancel(job["job_id"])
    assert again.status == 200
    assert again.body == cancelled
    # Nothing actionable remains: the worker stops and no later outcome lands.
    time.sleep(1.5)
    assert multi.job(job["job_id"]) == cancelled
    kinds = types(multi.events(job["job_id"]))
    assert kinds[-1] == "job.cancelled"
    assert kinds.count("job.cancelled") == 1
    assert not {"job.succeeded", "job.failed", "job.expired"} & set(kinds)


def test_17_cancel_right_after_admission(main: Client) -> None:
    # Queued or just running: either way the answer is a cancelled job, and it stays cancelled.
    job = main.admit(canonical_task(key("ref-17b"), None, params={"target_id": REFERENCE_TARGET}))
    response = main.cancel(job["job_id"])
    assert response.status == 200
    if response.body["status"] == "cancelled":
        assert response.body["error"]["code"] == "cancelled_by_consumer"
        assert main.wait_terminal(job["job_id"]) == response.body
    else:  # the worker was faster: a finished job is returned unchanged
        assert response.body["status"] in ("succeeded", "failed")


def test_18_no_business_terms_on_the_wire(main: Client) -> None:
    idempotency_key = key("ref-18")
    capabilities = main.capabilities()
    posted = main.submit(canonical_task(idempotency_key, None)).body
    page = main.jobs(idempotency_key=idempotency_key)
    missing = main.call("GET", "/jobs/does-not-exist", schema="Job").body
    for document in (capabilities, posted, page, missing):
        assert business_keys(document) == [], document
    assert list(posted) == ["job"]
    assert "slotId" not in posted["job"]
    assert "refetch_request_id" not in posted["job"]


def test_19_capabilities_from_live_configuration(main_stack: Stack, main: Client) -> None:
    capabilities = main.capabilities()
    # One declaration per registered job type; candidate_search is the reference's.
    assert [entry["name"] for entry in capabilities["job_types"]] == [
        "candidate_search",
        "asset_fetch",
    ]
    declaration = capabilities["job_types"][0]
    assert declaration["name"] == "candidate_search"
    assert declaration["params_schema"] == "#/$defs/CandidateSearchParams"
    assert declaration["result_schema"] == "#/$defs/Result_CandidateSearch"
    assert declaration["queued_timeout_ms"] == 1_800_000
    assert declaration["stall_timeout_ms"] == 900_000
    assert declaration["heartbeat_interval_ms"] == 30_000
    assert declaration["default_deadline_ms"] == 900_000
    job = main.admit(canonical_task(key("ref-19"), None, deadline_ms=None))
    assert job["deadline_at"] == job["created_at"] + 900_000
    # queued/stall budgets are deployment settings here (not live); the target's execution
    # ceiling is live: the next read after a change of the targets file reports it.
    changed = json.loads(json.dumps(MAIN_TARGETS))
    changed["targets"][0]["timeout_ms"] = 660_000
    main_stack.write_targets(changed)
    try:
        declaration = main.capabilities()["job_types"][0]
        assert declaration["default_deadline_ms"] == 660_000
        shorter = main.admit(canonical_task(key("ref-19b"), None, deadline_ms=None))
        assert shorter["deadline_at"] == shorter["created_at"] + 660_000
    finally:
        main_stack.write_targets(MAIN_TARGETS)
    assert main.capabilities()["job_types"][0]["default_deadline_ms"] == 900_000


def _quiet(client: Client, timeout: float = 20) -> None:
    """Wait until no job of the tenant is queued or running."""
    deadline = time.monotonic() + timeout
    while client.jobs(status="queued")["jobs"] or client.jobs(status="running")["jobs"]:
        assert time.monotonic() < deadline, "jobs still in flight"
        time.sleep(0.1)


def misconfigured_answers_503(stack: Stack) -> None:
    """Shared with consumer item 17: a deployment whose configuration is invalid has no job API."""
    client = stack.client
    _quiet(client)  # no running job should meet the broken configuration
    stack.write_targets("{not json")
    try:
        for method, path, body in (
            ("POST", "/jobs", canonical_task(key("broken"), None)),
            ("GET", "/capabilities", None),
        ):
            response = client.call(method, path, body, schema="Capabilities")
            assert response.status == 503, response.body
            assert response.body["error"]["code"] == "internal_error"
            assert response.body["error"]["retryable"] is False
            assert response.body["error"]["detail"]["reason"] == "job_api_disabled"
    finally:
        stack.write_targets(MAIN_TARGETS)
    client.capabilities()


def test_21_deployment_without_job_api_answers_503(main_stack: Stack) -> None:
    misconfigured_answers_503(main_stack)


def test_22_selector_only_task_targets_exactly_that_target(multi: Client) -> None:
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key("ref-22"),
        "params": {"target_id": NOVEL_TARGET},
    }
    job = multi.admit(task)
    done = multi.wait_terminal(job["job_id"])
    assert done["status"] == "succeeded", done
    # Only that target's work type (novel) is searched.
    assert {c["work_type"] for c in done["result"]["candidates"]} == {"novel"}


def test_23_selector_only_job_uses_the_target_query(multi: Client) -> None:
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key("ref-23"),
        "params": {"target_id": NOVEL_TARGET},
    }
    job = multi.admit(task)
    assert "params" not in job or "target_id" not in job.get("params", {})
    done = multi.wait_terminal(job["job_id"])
    assert done["status"] == "succeeded", done
    # No retrieval override: the matched tags come from the target's own default query.
    target = next(t for t in MULTI_TARGETS["targets"] if t["id"] == NOVEL_TARGET)
    for candidate in done["result"]["candidates"]:
        assert {tag["tag"] for tag in candidate["tags"]} <= set(target["query"]["tags"])


def test_24_no_selector_with_several_targets_is_ambiguous(multi: Client) -> None:
    idempotency_key = key("ref-24")
    task = canonical_task(idempotency_key, None)
    del task["params"]["constraints"]
    response = multi.submit(task)
    assert response.status == 409
    assert response.body["error"]["code"] == "invalid_params"
    assert response.body["error"]["detail"]["reason"] == "ambiguous_target"
    assert response.body["error"]["detail"]["targets"] == [
        target["id"] for target in MULTI_TARGETS["targets"]
    ]
    assert multi.jobs(idempotency_key=idempotency_key)["jobs"] == []


def test_25_unknown_selector_is_404_and_creates_nothing(multi: Client) -> None:
    idempotency_key = key("ref-25")
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": idempotency_key,
        "params": {"target_id": "nope"},
    }
    response = multi.submit(task)
    assert response.status == 404
    assert response.body["error"]["detail"]["reason"] == "unknown_target"
    assert multi.jobs(idempotency_key=idempotency_key)["jobs"] == []


@pytest.mark.parametrize("target_id", [42, "", "   "], ids=["number", "empty", "blank"])
def test_27_bad_selector_is_400(multi: Client, target_id: Any) -> None:
    idempotency_key = key("ref-27")
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": idempotency_key,
        "params": {"target_id": target_id},
    }
    response = multi.submit(task)
    assert response.status == 400
    assert response.body["error"]["code"] == "invalid_params"
    assert multi.jobs(idempotency_key=idempotency_key)["jobs"] == []


def test_29_capabilities_features(main: Client) -> None:
    features = main.capabilities()["job_types"][0]["features"]
    assert "target_selector" in features
    assert "events" in features


def test_percent_encoded_job_id_segment(main: Client) -> None:
    job = main.admit(canonical_task(key("ref-pct"), None))
    encoded = "".join(f"%{byte:02X}" for byte in job["job_id"].encode())
    response = main.call("GET", f"/jobs/{encoded}", schema="Job")
    assert response.status == 200, response.body
    assert response.body["job_id"] == job["job_id"]
    assert seg(job["job_id"]) == job["job_id"]  # URL-safe alphabet
