"""Hypothesis-generated query strings and ack bodies through the real handlers (moto).

Every answer is a 200 with a conforming document or a 4xx protocol error; never a 5xx; and a
refused ack changes nothing (I4, I9).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.harness import Api, canonical_task
from tests.support.validation import validate, validate_error
from tests.unit.test_query_fuzz import json_values, raw_query_strings

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


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


@FUZZ
@given(
    body=st.one_of(
        json_values,
        st.fixed_dictionaries({"ack_through": st.text(max_size=40)}),
        st.fixed_dictionaries({"ack_through": json_values}),
    )
)
def test_a_refused_ack_changes_nothing(api: Api, job_id: str, body: Any) -> None:
    before = api.get(f"/jobs/{job_id}/events?unacked=1").body
    response = api.post(f"/jobs/{job_id}/events/ack", body)
    _check(response, "AckResult")
    if response.status != 200:
        assert api.get(f"/jobs/{job_id}/events?unacked=1").body == before
