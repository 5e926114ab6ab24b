"""Reference conformance list (protocol-reference §8), job facade items 8-19, 21-27, 29."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from jobstream.runtime import Runtime
from tests.conftest import REFERENCE_TARGETS
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import callback_intents, mark_running, mark_succeeded
from tests.support.validation import business_keys, validate, validate_error


def submit(api: Api, **overrides: Any) -> dict[str, Any]:
    response = api.post("/jobs", canonical_task(**overrides))
    assert response.status == 202, response.body
    job: dict[str, Any] = response.body["job"]
    return job


def test_8_submit_answers_202_with_the_wrapped_queued_job(api: Api) -> None:
    response = api.post("/jobs", canonical_task())
    assert response.status == 202
    assert list(response.body) == ["job"]
    validate(response.body, "JobReceipt")
    job = response.body["job"]
    validate(job, "Job")
    assert job["protocol_version"] == "1"
    assert job["job_type"] == "candidate_search"
    assert job["status"] == "queued"
    assert job["idempotency_key"] == "6eb50329-20f2-4ea7-b95b-e4676b50d9f1"
    assert job["correlation_id"] == "review-chain:135"
    assert isinstance(job["created_at"], int)
    assert isinstance(job["updated_at"], int)
    assert "refetch" not in job["job_id"]
    assert "slot_id" not in job


def test_9_get_job_equals_the_submitted_job(api: Api) -> None:
    job = submit(api)
    response = api.get(f"/jobs/{job['job_id']}")
    assert response.status == 200
    validate(response.body, "Job")
    assert response.body == job


def test_10_list_by_idempotency_key(api: Api) -> None:
    job = submit(api)
    response = api.get("/jobs?idempotency_key=6eb50329-20f2-4ea7-b95b-e4676b50d9f1")
    assert response.status == 200
    validate(response.body, "JobPage")
    assert [item["job_id"] for item in response.body["jobs"]] == [job["job_id"]]


def test_11_queued_job_has_no_start_and_no_lease(api: Api) -> None:
    job = submit(api)
    assert job["started_at"] is None
    assert job["lease_active"] is False
    assert job["attempt"] == 0


def test_12_running_job_reports_lease_and_heartbeat(api: Api, rt: Runtime, clock: Clock) -> None:
    job = submit(api)
    now = clock.advance(5_000)
    mark_running(rt, job["job_id"], at=now, lease_until=now + 60_000)
    running = api.get(f"/jobs/{job['job_id']}").body
    validate(running, "Job")
    assert running["status"] == "running"
    assert running["started_at"] == now
    assert running["heartbeat_at"] == now
    assert running["lease_active"] is True
    assert running["lease_expires_at"] == now + 60_000
    assert running["progress"]["stage"] == "searching"
    clock.advance(61_000)
    assert api.get(f"/jobs/{job['job_id']}").body["lease_active"] is False


def test_13_succeeded_job_carries_result_and_no_error(api: Api, rt: Runtime, clock: Clock) -> None:
    job = submit(api)
    mark_succeeded(rt, job["job_id"], at=clock.advance(10_000))
    done = api.get(f"/jobs/{job['job_id']}").body
    validate(done, "Job")
    validate(done["result"], "Result_CandidateSearch")
    assert done["status"] == "succeeded"
    assert "error" not in done
    assert done["updated_at"] == clock.now


def test_14_replay_returns_the_same_job_and_records_nothing_new(api: Api, rt: Runtime) -> None:
    job = submit(api)
    replay = api.post("/jobs", canonical_task())
    assert replay.status == 200
    assert replay.body["job"]["job_id"] == job["job_id"]
    assert replay.body["job"] == job
    listed = api.get("/jobs?idempotency_key=6eb50329-20f2-4ea7-b95b-e4676b50d9f1").body["jobs"]
    assert len(listed) == 1
    assert len(callback_intents(rt, job["job_id"])) == 1
    assert api.get(f"/jobs/{job['job_id']}/events").body["unacked"] == 1


def test_15_same_key_different_params_conflicts(api: Api) -> None:
    submit(api)
    task = canonical_task()
    task["params"]["query"]["tags"] = ["西瓜肚", "another"]
    response = api.post("/jobs", task)
    assert response.status == 409
    validate_error(response.body)
    assert response.body["error"]["code"] == "idempotency_conflict"
    assert response.body["error"]["retryable"] is False
    assert len(api.get("/jobs").body["jobs"]) == 1


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"protocol_version": "2"}, 400, "unsupported_protocol_version"),
        ({"job_type": "video_upload"}, 400, "invalid_params"),
        ({"params": {"query": {"tags": []}}}, 400, "invalid_params"),
    ],
)
def test_16_request_errors(api: Api, overrides: dict[str, Any], status: int, code: str) -> None:
    response = api.post("/jobs", canonical_task(**overrides))
    assert response.status == status
    validate_error(response.body)
    assert response.body["error"]["code"] == code
    assert response.body["error"]["retryable"] is False
    assert api.get("/jobs").body["jobs"] == []


def test_16_unknown_job_is_404(api: Api) -> None:
    response = api.get("/jobs/does-not-exist")
    assert response.status == 404
    validate_error(response.body)
    assert response.body["error"] == {
        "code": "invalid_params",
        "message": "unknown job",
        "retryable": False,
    }


def test_17_cancel_queued_job(api: Api, rt: Runtime) -> None:
    job = submit(api)
    response = api.post(f"/jobs/{job['job_id']}/cancel")
    assert response.status == 200
    cancelled = response.body
    validate(cancelled, "Job")
    assert cancelled["status"] == "cancelled"
    assert cancelled["error"]["code"] == "cancelled_by_consumer"
    assert cancelled["error"]["retryable"] is False
    assert cancelled["error"]["detail"] == {"internal_code": "cancelled_by_consumer"}
    again = api.post(f"/jobs/{job['job_id']}/cancel")
    assert again.status == 200
    assert again.body == cancelled
    record = rt.store.get_job(job["job_id"])
    assert record is not None
    assert record.reason == "cancelled_by_consumer"
    assert record.lease_owner is None


def test_17_cancel_running_job_releases_the_lease(api: Api, rt: Runtime, clock: Clock) -> None:
    job = submit(api)
    now = clock.advance(1_000)
    mark_running(rt, job["job_id"], at=now, lease_until=now + 180_000)
    cancelled = api.post(f"/jobs/{job['job_id']}/cancel").body
    assert cancelled["status"] == "cancelled"
    assert cancelled["lease_active"] is False
    assert cancelled["lease_expires_at"] is None
    types = [event["type"] for event in api.get(f"/jobs/{job['job_id']}/events").body["events"]]
    assert types == ["job.accepted", "job.started", "job.cancelled"]


def test_17_cancel_of_a_finished_job_returns_it_unchanged(
    api: Api, rt: Runtime, clock: Clock
) -> None:
    job = submit(api)
    mark_succeeded(rt, job["job_id"], at=clock.advance(1_000))
    before = api.get(f"/jobs/{job['job_id']}").body
    response = api.post(f"/jobs/{job['job_id']}/cancel", {"anything": True})
    assert response.status == 200
    assert response.body == before


def test_cancel_unknown_job_names_it(api: Api) -> None:
    response = api.post("/jobs/job_nope/cancel")
    assert response.status == 404
    validate_error(response.body)
    assert response.body["error"]["detail"] == {"reason": "unknown_job", "job_id": "job_nope"}


def test_18_no_business_terms_on_the_wire(api: Api) -> None:
    capabilities = api.get("/capabilities").body
    posted = api.post("/jobs", canonical_task()).body
    page = api.get("/jobs?idempotency_key=6eb50329-20f2-4ea7-b95b-e4676b50d9f1").body
    missing = api.get("/jobs/does-not-exist").body
    for document in (capabilities, posted, page, missing):
        assert business_keys(document) == [], document
    assert list(posted) == ["job"]
    assert "slotId" not in posted["job"]


def test_19_capabilities_from_live_configuration(
    api: Api, rt: Runtime, clock: Clock, targets_path: Path
) -> None:
    response = api.get("/capabilities")
    assert response.status == 200
    validate(response.body, "Capabilities")
    # One declaration per registered job type; candidate_search is the reference's.
    assert [entry["name"] for entry in response.body["job_types"]] == [
        "candidate_search",
        "asset_fetch",
    ]
    declaration = response.body["job_types"][0]
    assert declaration["name"] == "candidate_search"
    assert declaration["params_schema"] == "#/$defs/CandidateSearchParams"
    assert declaration["result_schema"] == "#/$defs/Result_CandidateSearch"
    assert declaration["queued_timeout_ms"] == 1_800_000
    assert declaration["stall_timeout_ms"] == 900_000
    assert declaration["heartbeat_interval_ms"] == 30_000
    assert declaration["default_deadline_ms"] == 900_000
    assert response.body["server_time"] == clock.now
    job = api.post("/jobs", canonical_task(deadline_ms=None)).body["job"]
    assert job["deadline_at"] == job["created_at"] + 900_000
    # The targets file is live: a new ceiling shows on the next read.
    changed = json.loads(json.dumps(REFERENCE_TARGETS))
    changed["targets"][0]["timeout_ms"] = 660_000
    targets_path.write_text(json.dumps(changed), encoding="utf-8")
    import os

    os.utime(targets_path, (1, 1))
    assert api.get("/capabilities").body["job_types"][0]["default_deadline_ms"] == 660_000


def test_deadline_ms_shortens_but_never_extends_the_ceiling(api: Api) -> None:
    short = api.post("/jobs", canonical_task(idempotency_key="short", deadline_ms=60_000)).body[
        "job"
    ]
    assert short["deadline_at"] == short["created_at"] + 60_000
    long = api.post("/jobs", canonical_task(idempotency_key="long", deadline_ms=5_400_000)).body[
        "job"
    ]
    assert long["deadline_at"] == long["created_at"] + 900_000


def test_21_misconfigured_deployment_answers_503(api: Api, rt: Runtime, targets_path: Path) -> None:
    targets_path.write_text("{not json", encoding="utf-8")
    import os

    os.utime(targets_path, (2, 2))
    response = api.post("/jobs", canonical_task())
    assert response.status == 503
    validate_error(response.body)
    assert response.body["error"]["code"] == "internal_error"
    assert response.body["error"]["retryable"] is False
    assert response.body["error"]["detail"] == {"reason": "job_api_disabled"}


def test_a_target_changed_to_outlive_the_worker_disables_the_api(
    api: Api, targets_path: Path
) -> None:
    """The targets file is live: a re-read one whose target may run past the worker's Lambda
    timeout is refused like an invalid file (nothing is admitted to be cut off later)."""
    import os

    changed = json.loads(targets_path.read_text(encoding="utf-8"))
    changed["targets"][0]["timeout_ms"] = 900_001
    targets_path.write_text(json.dumps(changed), encoding="utf-8")
    os.utime(targets_path, (3, 3))
    response = api.post("/jobs", canonical_task(idempotency_key="too-long"))
    assert response.status == 503
    assert response.body["error"]["detail"] == {"reason": "job_api_disabled"}
    assert api.get("/jobs").body["jobs"] == []  # nothing admitted


FOUR_TARGETS: dict[str, Any] = {
    "account": "default",
    "targets": [
        {
            "id": "bot1-illust-a",
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["a"]},
        },
        {"id": "bot1-novel-b", "work_type": "novel", "source": "catalog", "query": {"tags": ["b"]}},
        {
            "id": "bot2-illust-c",
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["c"]},
        },
        {
            "id": "bot2-novel-marunomi",
            "work_type": "novel",
            "source": "catalog",
            "query": {"tags": ["d"]},
        },
    ],
}


@pytest.fixture
def four_targets(targets_path: Path) -> None:
    import os

    targets_path.write_text(json.dumps(FOUR_TARGETS), encoding="utf-8")
    os.utime(targets_path, (3, 3))


def selector_task(target_id: Any, key: str = "selector-key") -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": target_id},
    }


def test_22_23_selector_only_task(api: Api, rt: Runtime, four_targets: None) -> None:
    response = api.post("/jobs", selector_task("bot2-novel-marunomi"))
    assert response.status == 202
    validate(response.body["job"], "Job")
    record = rt.store.get_job(response.body["job"]["job_id"])
    assert record is not None
    assert record.target_id == "bot2-novel-marunomi"
    assert "target_id" not in record.params
    assert record.params == {}


def test_24_no_selector_with_several_targets_is_ambiguous(api: Api, four_targets: None) -> None:
    task = canonical_task()
    del task["params"]["constraints"]
    response = api.post("/jobs", task)
    assert response.status == 409
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"
    assert response.body["error"]["detail"] == {
        "reason": "ambiguous_target",
        "targets": ["bot1-illust-a", "bot1-novel-b", "bot2-illust-c", "bot2-novel-marunomi"],
    }


def test_25_unknown_selector_is_404_and_creates_nothing(api: Api, four_targets: None) -> None:
    response = api.post("/jobs", selector_task("nope"))
    assert response.status == 404
    validate_error(response.body)
    assert response.body["error"]["detail"] == {"reason": "unknown_target", "target_id": "nope"}
    assert api.get("/jobs").body["jobs"] == []


@pytest.mark.parametrize("target_id", [42, "", "   "])
def test_27_bad_selector_is_400(api: Api, four_targets: None, target_id: Any) -> None:
    response = api.post("/jobs", selector_task(target_id))
    assert response.status == 400
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"


def test_29_capabilities_features(api: Api) -> None:
    features = api.get("/capabilities").body["job_types"][0]["features"]
    assert "target_selector" in features
    assert "events" in features


def test_job_ids_are_url_safe_and_case_sensitive(api: Api) -> None:
    lower = submit(api, idempotency_key="Key/With:Odd%Chars")
    upper = submit(api, idempotency_key="KEY/WITH:ODD%CHARS")
    assert lower["job_id"] != upper["job_id"]
    for job in (lower, upper):
        assert re.fullmatch(r"[A-Za-z0-9_-]+", job["job_id"])
    # A key that differs only by surrounding whitespace is the same (trimmed) key.
    replay = api.post("/jobs", canonical_task(idempotency_key="  Key/With:Odd%Chars\ufeff"))
    assert replay.status == 200
    assert replay.body["job"]["job_id"] == lower["job_id"]


def test_events_url_is_absolute_when_the_host_is_known(api: Api) -> None:
    job = submit(api)
    assert job["events_url"] == f"https://jobs.example.test/jobs/{job['job_id']}/events"


def test_labels_are_stored_and_echoed(api: Api) -> None:
    job = submit(api)
    assert job["labels"] == {"origin": "moderation", "tenant": "bot1"}
    event = api.get(f"/jobs/{job['job_id']}/events").body["events"][0]
    assert event["labels"] == {"origin": "moderation", "tenant": "bot1"}


# Names DynamoDB would refuse or read as syntax if labels were stored as a map.
ODD_LABELS = {"": "empty name", "#n": "", ":v": "x", "a.b": "y", "S": "z", "M": "{}", "NULL": "1"}


def test_labels_with_any_names_are_kept_exactly(api: Api, rt: Runtime) -> None:
    job = submit(api, labels=ODD_LABELS)
    assert job["labels"] == ODD_LABELS
    job_id = job["job_id"]
    assert api.get(f"/jobs/{job_id}").body["labels"] == ODD_LABELS
    for query in ("", "?status=queued", f"?idempotency_key={job['idempotency_key']}"):
        listing = api.get(f"/jobs{query}")
        assert listing.status == 200, listing.body
        assert [listed["labels"] for listed in listing.body["jobs"]] == [ODD_LABELS]
    page = api.get(f"/jobs/{job_id}/events")
    assert page.body["events"][0]["labels"] == ODD_LABELS
    assert rt.store.get_job(job_id).labels == ODD_LABELS  # type: ignore[union-attr]


def test_replay_keeps_the_first_request_correlation_and_callback(api: Api, rt: Runtime) -> None:
    job = submit(api)
    replay = api.post(
        "/jobs", canonical_task(correlation_id="other", callback_url="https://other.test/cb")
    )
    assert replay.status == 200
    assert replay.body["job"]["correlation_id"] == "review-chain:135"
    record = rt.store.get_job(job["job_id"])
    assert record is not None
    assert record.callback_url == "https://consumer.example.test/api/bot1/v1/jobs/events"
