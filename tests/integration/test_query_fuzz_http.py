"""Hypothesis-generated query strings, ack bodies and Task strings through the real handlers (moto).

Every answer is a 200 with a conforming document or a 4xx protocol error; never a 5xx; a refused
ack changes nothing (I4, I9); an admitted Task's strings come back exactly as sent.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstream.lifecycle.identity import derive_job_id
from jobstream.protocol.events import JOB_NUMBER_DIGITS, job_number
from tests.support.harness import START_MS, Api, canonical_task
from tests.support.validation import validate, validate_error
from tests.unit.test_query_fuzz import json_values, raw_query_strings

FUZZ = settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _without_fragment(raw: str) -> str:
    return raw.replace("#", "")  # a fragment never reaches API Gateway


def _check(response: Any, document: str) -> None:
    assert response.status < 500, response.body
    if response.status == 200:
        validate(response.body, document)
    else:
        assert 400 <= response.status < 500
        validate_error(response.body)


@pytest.fixture
def job_id(api: Api) -> str:
    response = api.post("/jobs", canonical_task())
    assert response.status == 202
    job: str = response.body["job"]["job_id"]
    return job


@FUZZ
@given(raw=raw_query_strings())
def test_any_listing_query_is_answered_without_a_5xx(api: Api, job_id: str, raw: str) -> None:
    _check(api.get(f"/jobs?{_without_fragment(raw)}"), "JobPage")


@FUZZ
@given(raw=raw_query_strings())
def test_any_events_query_is_answered_without_a_5xx(api: Api, job_id: str, raw: str) -> None:
    _check(api.get(f"/jobs/{job_id}/events?{_without_fragment(raw)}"), "EventPage")


# The job the `job_id` fixture admits (the canonical Task of tenant acme), and another.
OUR_JOB = derive_job_id("acme", canonical_task()["idempotency_key"])
OTHER_JOB = derive_job_id("acme", "another key")


@st.composite
def near_event_ids(draw: st.DrawFn) -> str:
    """Ids shaped like ours: right or wrong time, sequence, padding or job."""
    at = draw(st.sampled_from([START_MS, START_MS + 1, 0, 10**19]))
    sequence = draw(st.integers(0, 3))
    padding = draw(st.sampled_from(["", "0", "00"]))
    number = f"{job_number(draw(st.sampled_from([OUR_JOB, OTHER_JOB]))):0{JOB_NUMBER_DIGITS}d}"
    suffix = draw(st.sampled_from(["", number, number[1:], f"0{number}"]))
    return draw(
        st.sampled_from(
            [f"evt-{padding}{at}-{sequence}{suffix}", f"evt-{at}-{padding}{sequence}{suffix}"]
        )
    )


@FUZZ
@given(
    body=st.one_of(
        json_values,
        st.fixed_dictionaries({"ack_through": st.text(max_size=40) | near_event_ids()}),
        st.fixed_dictionaries({"ack_through": json_values}),
    )
)
def test_an_ack_moves_only_for_the_id_of_an_event(api: Api, job_id: str, body: Any) -> None:
    """Only the exact id of the job's event moves the cursor; any other answer, 4xx or 200,
    leaves the stream as it was (I4, I9)."""
    page = api.get(f"/jobs/{job_id}/events").body
    (only_event,) = page["events"]
    before = api.get(f"/jobs/{job_id}/events?unacked=1").body
    response = api.post(f"/jobs/{job_id}/events/ack", body)
    _check(response, "AckResult")
    after = api.get(f"/jobs/{job_id}/events?unacked=1").body
    if after != before:
        assert response.status == 200
        assert body["ack_through"] == only_event["event_id"]
        assert (response.body["acked"], response.body["unacked"]) == (1, 0)
    elif response.status == 200:
        assert response.body["acked"] == (0 if before["events"] else 1)


# Any code point, unpaired surrogates included (Hypothesis leaves them out unless asked), and
# names that mean something to DynamoDB expressions or its type tags.
_characters = st.characters(exclude_categories=()) | st.sampled_from(
    ["\ud800", "\udfff", "\U0001f600"]
)
# Joined by hand: st.text drops surrogates whatever its alphabet allows.
any_text = st.lists(_characters, max_size=6).map("".join) | st.sampled_from(
    ["", " ", "#n", ":v", "a.b", "S", "M", "NULL", "\x00"]
)
_submissions = itertools.count()


def _as_text(value: str) -> str | None:
    """The text a JSON reader makes of this string's escapes: pairs of surrogates are joined into
    one character; None when a surrogate is left without its pair (not Unicode text)."""
    try:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return None


@FUZZ
@given(
    labels=st.dictionaries(any_text, any_text, max_size=4),
    correlation=any_text,
    key_suffix=any_text,
)
def test_task_strings_round_trip_exactly_or_are_refused(
    api: Api, labels: dict[str, str], correlation: str, key_suffix: str
) -> None:
    key = f"fuzz-{next(_submissions)}-{key_suffix}"
    task = canonical_task(idempotency_key=key, labels=labels, correlation_id=correlation)
    # ensure_ascii writes an unpaired surrogate as its \\u escape, as a client's JSON would.
    raw = json.dumps(task, ensure_ascii=True).encode()
    response = api.post("/jobs", raw=raw, headers={"content-type": "application/json"})
    texts = [key, correlation, *labels, *labels.values()]
    if any(_as_text(text) is None for text in texts):
        assert response.status == 400, response.body
        assert response.body["error"]["detail"] == {"reason": "unpaired_surrogate"}
        return
    assert response.status == 202, response.body
    job = response.body["job"]
    validate(job, "Job")
    assert job.get("labels", {}) == {_as_text(name): _as_text(v) for name, v in labels.items()}
    assert job.get("correlation_id", "") == _as_text(correlation)
    assert api.get(f"/jobs/{job['job_id']}").body == job
    listing = api.get("/jobs?status=queued&limit=500")
    _check(listing, "JobPage")
    assert job in listing.body["jobs"]


@pytest.fixture
def spread_jobs(api: Api, rt: Any) -> list[dict[str, Any]]:
    """18 jobs of one tenant over many `tenant_jobs` shards, two correlation ids, two statuses."""
    from jobstream.store import keys
    from tests.support.state import mark_failed

    made = []
    for index in range(18):
        task = canonical_task(idempotency_key=f"spread-{index}", correlation_id=f"c{index % 2}")
        response = api.post("/jobs", task)
        assert response.status == 202
        made.append(response.body["job"])
    for job in made[::3]:
        mark_failed(rt, job["job_id"], at=START_MS + 1, reason="no_candidate")
        job["status"] = "failed"
    assert len({keys.shard_of(j["job_id"], keys.TENANT_SHARDS) for j in made}) >= 8
    return made


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    limit=st.integers(2, 20),
    status=st.sampled_from([None, "queued", "failed", "running"]),
    correlation=st.sampled_from([None, "c0", "c1"]),
)
def test_any_listing_walk_over_shards_gives_each_match_once_newest_first(
    api: Api,
    spread_jobs: list[dict[str, Any]],
    limit: int,
    status: str | None,
    correlation: str | None,
) -> None:
    query = f"limit={limit}"
    query += f"&status={status}" if status else ""
    query += f"&correlation_id={correlation}" if correlation else ""
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        response = api.get(f"/jobs?{query}" + (f"&cursor={cursor}" if cursor else ""))
        _check(response, "JobPage")
        assert response.status == 200
        assert len(response.body["jobs"]) <= limit
        seen += [job["job_id"] for job in response.body["jobs"]]
        cursor = response.body.get("next_cursor")
        if not cursor:
            break
    wanted = [
        job
        for job in spread_jobs
        if status in (None, job["status"]) and correlation in (None, job["correlation_id"])
    ]
    newest_first = sorted(wanted, key=lambda job: (job["created_at"], job["job_id"]), reverse=True)
    assert seen == [job["job_id"] for job in newest_first]
