"""GET /jobs: the documented filters and an opaque cursor (design §1 item 5)."""

from __future__ import annotations

import base64
import json

import pytest

from jobstream.service.runtime import Runtime
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import mark_failed
from tests.support.validation import validate, validate_error


@pytest.fixture
def seven_jobs(api: Api, clock: Clock) -> list[str]:
    ids = []
    for index in range(7):
        clock.advance(1_000)
        correlation = "even" if index % 2 == 0 else "odd"
        response = api.post(
            "/jobs", canonical_task(idempotency_key=f"key-{index}", correlation_id=correlation)
        )
        ids.append(response.body["job"]["job_id"])
    return ids


def collect(api: Api, query: str) -> list[str]:
    ids: list[str] = []
    cursor = None
    for _ in range(20):
        suffix = f"&cursor={cursor}" if cursor else ""
        response = api.get(f"/jobs?{query}{suffix}")
        assert response.status == 200, response.body
        validate(response.body, "JobPage")
        ids += [job["job_id"] for job in response.body["jobs"]]
        cursor = response.body.get("next_cursor")
        if not cursor:
            return ids
    raise AssertionError("listing never ended")


def test_lists_newest_first_with_pages(api: Api, seven_jobs: list[str]) -> None:
    assert collect(api, "limit=3") == list(reversed(seven_jobs))
    assert collect(api, "") == list(reversed(seven_jobs))


def test_filters_by_correlation(api: Api, seven_jobs: list[str]) -> None:
    assert collect(api, "correlation_id=odd&limit=2") == [
        seven_jobs[5],
        seven_jobs[3],
        seven_jobs[1],
    ]


def test_filters_by_status(api: Api, rt: Runtime, clock: Clock, seven_jobs: list[str]) -> None:
    mark_failed(rt, seven_jobs[2], at=clock.advance(1), reason="no_candidate")
    mark_failed(rt, seven_jobs[4], at=clock.advance(1), reason="no_candidate")
    assert collect(api, "status=failed&limit=1") == [seven_jobs[4], seven_jobs[2]]
    assert collect(api, "status=failed&correlation_id=even") == [seven_jobs[4], seven_jobs[2]]
    assert len(collect(api, "status=queued&limit=2")) == 5


def test_idempotency_key_is_exact_and_combines_with_filters(
    api: Api, seven_jobs: list[str]
) -> None:
    assert collect(api, "idempotency_key=key-3") == [seven_jobs[3]]
    assert collect(api, "idempotency_key=KEY-3") == []
    assert collect(api, "idempotency_key=key-3&correlation_id=even") == []
    assert collect(api, "idempotency_key=unknown") == []


@pytest.mark.parametrize(
    "query",
    [
        "idempotency_key=",
        "idempotency_key=%20",
        "idempotency_key=a&idempotency_key=b",
        "limit=0",
        "limit=501",
        "limit=ten",
        "status=done",
        "cursor=not-a-cursor",
        "cursor=",
    ],
)
def test_bad_filters_are_400(api: Api, query: str) -> None:
    response = api.get(f"/jobs?{query}")
    assert response.status == 400
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"


def _cursor(**start_key: str) -> str:
    raw = json.dumps(start_key).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


JOB_A = "job_" + "A" * 32
JOB_B = "job_" + "B" * 32


@pytest.mark.parametrize(
    "start_key",
    [
        # Shaped by hand: DynamoDB would refuse a key over 1 KiB, or text that is not UTF-8.
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": "1" * 13 + "#" + "x" * 2000},
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": f"{'1' * 13}#{JOB_A}\ud800"},
        {"pk": "JOB#" + "y" * 3000, "sk": "#JOB", "gsi1sk": f"{'1' * 13}#{JOB_A}"},
        {"pk": f"JOB#{JOB_A}", "sk": "EVT#0000000001", "gsi1sk": f"{'1' * 13}#{JOB_A}"},
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": f"{'1' * 13}#{JOB_B}"},
        {"pk": f"JOB#{JOB_A}", "sk": "#JOB", "gsi1sk": f"1#{JOB_A}"},
    ],
)
def test_a_cursor_not_shaped_like_ours_is_400(api: Api, start_key: dict[str, str]) -> None:
    cursor = _cursor(**start_key).replace("%", "%25")
    response = api.get(f"/jobs?cursor={cursor}")
    assert response.status == 400, response.body
    assert response.body["error"]["detail"] == {"field": "cursor"}


def test_a_cursor_shaped_like_ours_pages_on(api: Api, seven_jobs: list[str]) -> None:
    first = api.get("/jobs?limit=3").body
    start_key = json.loads(base64.urlsafe_b64decode(first["next_cursor"] + "==="))
    rebuilt = _cursor(**start_key)
    assert (
        api.get(f"/jobs?limit=3&cursor={rebuilt}").body["jobs"]
        == (api.get(f"/jobs?limit=3&cursor={first['next_cursor']}").body["jobs"])
    )


def test_a_correlation_filter_longer_than_any_job_can_carry_is_400(api: Api) -> None:
    response = api.get(f"/jobs?correlation_id={'c' * 201}")
    assert response.status == 400
    assert response.body["error"]["message"] == "correlation_id must be at most 200 characters"
    assert api.get(f"/jobs?correlation_id={'c' * 200}").body["jobs"] == []


def test_cursor_from_another_listing_is_rejected(api: Api, seven_jobs: list[str]) -> None:
    cursor = api.get("/jobs?limit=2").body["next_cursor"]
    response = api.get(f"/jobs?correlation_id=odd&cursor={cursor}")
    assert response.status == 400
    validate_error(response.body)
