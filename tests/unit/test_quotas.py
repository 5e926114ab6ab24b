"""Quotas in the registry, and how a refused charge of the counter is read (store/quotas.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from jobstream.config.tenants import RegistryError, parse_registry
from jobstream.http.statuses import http_status
from jobstream.protocol.errors import quota_exceeded
from jobstream.store.codec import to_item
from jobstream.store.ports import QuotaCharge, QuotaExceededError
from jobstream.store.quotas import MINUTE_MS, OPEN_JOBS_RETRY_AFTER_S, Attempt, next_attempt

REPOSITORY = Path(__file__).resolve().parents[2]
MINUTE = 29_841_353
# 45 s into the minute.
NOW_MS = MINUTE * MINUTE_MS + 45_000


def registry_with(quotas: Any) -> str:
    return json.dumps({"tenants": {"acme": {"quotas": quotas}}})


def test_quotas_are_optional_and_each_one_too() -> None:
    assert parse_registry(json.dumps({"tenants": {"acme": {}}})).tenants["acme"].quotas is None
    registry = parse_registry(registry_with({"max_open_jobs": 10}))
    quotas = registry.tenants["acme"].quotas
    assert quotas is not None
    assert (quotas.max_open_jobs, quotas.admissions_per_minute) == (10, None)
    assert quotas.limited
    empty = parse_registry(registry_with({})).tenants["acme"].quotas
    assert empty is not None
    assert not empty.limited


def test_quotas_round_trip_through_the_document() -> None:
    text = registry_with({"max_open_jobs": 3, "admissions_per_minute": 60})
    registry = parse_registry(text)
    assert parse_registry(registry.to_json()) == registry
    assert json.loads(registry.to_json())["tenants"]["acme"]["quotas"] == {
        "max_open_jobs": 3,
        "admissions_per_minute": 60,
    }


@pytest.mark.parametrize(
    "quotas",
    [
        {"max_open_jobs": 0},
        {"admissions_per_minute": -1},
        {"max_open_jobs": "10"},
        {"max_open_jobs": 1.5},
        {"max_open_jobs": True},
        {"max_jobs": 10},
        [10],
    ],
)
def test_invalid_quotas_are_refused(quotas: Any) -> None:
    with pytest.raises(RegistryError, match="quotas"):
        parse_registry(registry_with(quotas))


def charge(**quotas: int) -> Attempt:
    return Attempt.first(QuotaCharge("acme", NOW_MS, **quotas))


def old(**values: int) -> dict[str, Any]:
    return to_item(values)


def test_a_counter_at_max_open_jobs_refuses() -> None:
    with pytest.raises(QuotaExceededError) as refused:
        next_attempt(charge(max_open_jobs=2), old(open_jobs=2))
    assert (refused.value.quota, refused.value.limit) == ("max_open_jobs", 2)
    assert refused.value.retry_after_s == OPEN_JOBS_RETRY_AFTER_S


def test_a_full_window_refuses_until_the_next_minute() -> None:
    attempt = charge(admissions_per_minute=5)
    with pytest.raises(QuotaExceededError) as refused:
        next_attempt(attempt, old(open_jobs=1, window_minute=MINUTE, window_admissions=5))
    assert (refused.value.quota, refused.value.retry_after_s) == ("admissions_per_minute", 15)


def test_a_window_of_an_earlier_minute_is_started_again() -> None:
    attempt = charge(admissions_per_minute=5)
    for state in (None, old(open_jobs=4), old(window_minute=MINUTE - 3, window_admissions=5)):
        retried = next_attempt(attempt, state)
        assert (retried.minute, retried.new_window) == (MINUTE, True)


def test_a_window_started_meanwhile_is_added_to() -> None:
    attempt = Attempt(QuotaCharge("acme", NOW_MS, admissions_per_minute=5), MINUTE, True)
    retried = next_attempt(attempt, old(window_minute=MINUTE, window_admissions=1))
    assert (retried.minute, retried.new_window) == (MINUTE, False)
    ahead = next_attempt(attempt, old(window_minute=MINUTE + 1, window_admissions=1))
    assert (ahead.minute, ahead.new_window) == (MINUTE + 1, False)


@pytest.mark.parametrize("quota", ["max_open_jobs", "admissions_per_minute"])
def test_the_refusal_is_the_429_the_openapi_document_declares(quota: str) -> None:
    error = quota_exceeded(quota, 7, 5)
    assert (http_status(error), error.retry_after_s) == (429, 5)
    document = json.loads((REPOSITORY / "schemas" / "openapi.json").read_text(encoding="utf-8"))
    registry: Registry = Registry().with_resource(
        "urn:openapi", Resource.from_contents(document, default_specification=DRAFT202012)
    )
    declared = "urn:openapi#/components/responses/QuotaExceeded/content/application~1json/schema"
    Draft202012Validator({"$ref": declared}, registry=registry).validate(error.body())
    refused = dict(error.body(), error={**error.body()["error"], "retryable": False})
    assert not Draft202012Validator({"$ref": declared}, registry=registry).is_valid(refused)
