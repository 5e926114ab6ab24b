"""Reference conformance list (protocol-reference §8), event stream items 30-42."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobstream.domain import IntentRef
from jobstream.protocol.events import callback_event_id, callback_idempotency_key
from jobstream.runtime import Runtime
from tests.support.harness import Api, Clock, canonical_task
from tests.support.state import callback_intents, mark_failed, mark_running, mark_succeeded
from tests.support.validation import validate, validate_error


def submit(api: Api, **overrides: Any) -> str:
    response = api.post("/jobs", canonical_task(**overrides))
    assert response.status == 202, response.body
    job_id: str = response.body["job"]["job_id"]
    return job_id


def page(api: Api, job_id: str, query: str = "") -> dict[str, Any]:
    response = api.get(f"/jobs/{job_id}/events{query}")
    assert response.status == 200, response.body
    validate(response.body, "EventPage")
    for event in response.body["events"]:
        validate(event, "Event")
    body: dict[str, Any] = response.body
    return body


def types(body: dict[str, Any]) -> list[str]:
    return [event["type"] for event in body["events"]]


def ack(api: Api, job_id: str, ack_through: Any) -> dict[str, Any]:
    response = api.post(f"/jobs/{job_id}/events/ack", {"ack_through": ack_through})
    assert response.status == 200, response.body
    validate(response.body, "AckResult")
    body: dict[str, Any] = response.body
    return body


def test_30_first_page_after_submit(api: Api, clock: Clock) -> None:
    job_id = submit(api)
    body = page(api, job_id)
    assert body["job_id"] == job_id
    assert body["unacked"] == 1
    assert isinstance(body["server_time"], int)
    assert "next_after" not in body
    (event,) = body["events"]
    assert event["type"] == "job.accepted"
    assert event["protocol_version"] == "1"
    assert event["job_id"] == job_id
    assert event["correlation_id"] == "review-chain:135"
    assert isinstance(event["at"], int)
    assert event["at"] > 0
    assert re.fullmatch(r"evt-\d+-\d+", event["event_id"])
    assert event["payload"]["detail"] == {"internal_kind": "job.requested"}


def test_31_events_and_ack_need_the_bearer(api: Api) -> None:
    job_id = submit(api)
    anonymous = Api(token=None)
    for response in (
        anonymous.get(f"/jobs/{job_id}/events"),
        anonymous.post(f"/jobs/{job_id}/events/ack", {"ack_through": "evt-1-1"}),
        Api(token="wrong").get(f"/jobs/{job_id}/events"),
    ):
        assert response.status == 401
        validate_error(response.body)
        assert response.body["error"]["code"] == "auth_error"


def test_32_events_of_an_unknown_job(api: Api) -> None:
    response = api.get("/jobs/job_unknown/events")
    assert response.status == 404
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"


def test_33_started_event_and_after_cursor(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api)
    now = clock.advance(2_000)
    mark_running(rt, job_id, at=now, lease_until=now + 60_000)
    body = page(api, job_id)
    assert types(body) == ["job.accepted", "job.started"]
    ats = [event["at"] for event in body["events"]]
    assert ats == sorted(ats)
    after = page(api, job_id, f"?after={body['events'][0]['event_id']}")
    assert types(after) == ["job.started"]
    assert after["unacked"] == 2


def test_34_ack_of_the_last_event(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api)
    now = clock.advance(2_000)
    mark_running(rt, job_id, at=now, lease_until=now + 60_000)
    events = page(api, job_id)["events"]
    result = ack(api, job_id, events[-1]["event_id"])
    assert result["job_id"] == job_id
    assert (result["acked"], result["unacked"]) == (2, 0)
    assert isinstance(result["server_time"], int)
    again = ack(api, job_id, events[-1]["event_id"])
    assert (again["acked"], again["unacked"]) == (2, 0)
    unacked = page(api, job_id, "?unacked=1")
    assert unacked["events"] == []
    assert unacked["unacked"] == 0
    assert types(page(api, job_id)) == ["job.accepted", "job.started"]


def test_35_acks_that_do_not_move_the_cursor(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api)
    now = clock.advance(2_000)
    mark_running(rt, job_id, at=now, lease_until=now + 60_000)
    events = page(api, job_id)["events"]
    unknown = ack(api, job_id, "evt-99999999999-999999")
    assert (unknown["acked"], unknown["unacked"]) == (0, 2)
    assert page(api, job_id)["unacked"] == 2
    assert ack(api, job_id, "not-an-event-id")["acked"] == 0
    assert ack(api, job_id, events[1]["event_id"])["acked"] == 2
    rewind = ack(api, job_id, events[0]["event_id"])
    assert (rewind["acked"], rewind["unacked"]) == (2, 0)
    oldest = ack(api, job_id, "evt-1-1")
    assert (oldest["acked"], oldest["unacked"]) == (2, 0)


@pytest.mark.parametrize("body", [{}, {"ack_through": ""}, {"ack_through": 42}, [], "x"])
def test_36_bad_ack_bodies(api: Api, body: Any) -> None:
    job_id = submit(api)
    response = api.post(f"/jobs/{job_id}/events/ack", body)
    assert response.status == 400
    validate_error(response.body)
    assert response.body["error"]["code"] == "invalid_params"
    assert page(api, job_id)["unacked"] == 1


def test_36_bad_unacked_query(api: Api) -> None:
    job_id = submit(api)
    response = api.get(f"/jobs/{job_id}/events?unacked=maybe")
    assert response.status == 400
    validate_error(response.body)
    assert response.body["error"]["message"] == "unacked must be 1 or 0"
    assert response.body["error"]["detail"] == {"field": "unacked"}


def test_bad_query_is_checked_before_the_job_lookup(api: Api) -> None:
    assert api.get("/jobs/job_unknown/events?after=").status == 400
    assert api.post("/jobs/job_unknown/events/ack", {}).status == 400


def test_37_ack_never_changes_the_job(api: Api) -> None:
    job_id = submit(api)
    before = api.get(f"/jobs/{job_id}").body
    ack(api, job_id, page(api, job_id)["events"][0]["event_id"])
    assert api.get(f"/jobs/{job_id}").body == before


def test_38_failed_job(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api)
    now = clock.advance(2_000)
    mark_running(rt, job_id, at=now, lease_until=now + 60_000)
    mark_failed(rt, job_id, at=clock.advance(3_000), reason="delivery_failed")
    body = page(api, job_id)
    assert types(body) == ["job.accepted", "job.started", "job.failed"]
    terminal = body["events"][-1]
    assert terminal["payload"]["detail"] == {"internal_kind": "job.outcome_failed"}
    assert terminal["payload"]["job"]["status"] == "failed"
    validate(terminal["payload"]["error"], "Error")
    assert terminal["payload"]["error"]["code"] == "delivery_failed"
    assert "result" not in terminal["payload"]
    ack(api, job_id, terminal["event_id"])
    after_ack = page(api, job_id)
    assert types(after_ack)[-1] == "job.failed"
    assert after_ack["unacked"] == 0
    assert page(api, job_id)["events"] == after_ack["events"]


def test_39_expired_without_start(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api)
    mark_failed(rt, job_id, at=clock.advance(1_800_000), reason="queued_too_long", status="expired")
    body = page(api, job_id)
    assert types(body) == ["job.accepted", "job.expired"]
    terminal = body["events"][-1]
    assert terminal["payload"]["detail"] == {"internal_kind": "job.outcome_expired"}
    assert terminal["payload"]["job"]["status"] == "expired"
    assert terminal["payload"]["error"]["code"] == "queued_too_long"
    assert terminal["payload"]["job"]["started_at"] is None


def test_40_succeeded(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api)
    now = clock.advance(2_000)
    mark_running(rt, job_id, at=now, lease_until=now + 60_000)
    mark_succeeded(rt, job_id, at=clock.advance(2_000))
    body = page(api, job_id)
    assert "job.succeeded" in types(body)
    terminal = body["events"][-1]
    assert terminal["payload"]["job"]["status"] == "succeeded"
    validate(terminal["payload"]["result"], "Result_CandidateSearch")
    assert "error" not in terminal["payload"]


def test_41_cancel_shows_in_the_stream(api: Api) -> None:
    job_id = submit(api)
    assert api.post(f"/jobs/{job_id}/cancel").status == 200
    assert types(page(api, job_id)) == ["job.accepted", "job.cancelled"]


def test_42_no_callback_no_intent(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api, callback_url=None)
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    body = page(api, job_id)
    assert types(body) == ["job.accepted", "job.failed"]
    assert body["unacked"] == 2
    assert callback_intents(rt, job_id) == []


def test_43_callback_intents_are_recorded_once_per_event(
    api: Api, rt: Runtime, clock: Clock
) -> None:
    job_id = submit(api)
    (stored,) = callback_intents(rt, job_id)
    accepted_intent = rt.callbacks.get(IntentRef(job_id, 1))
    assert accepted_intent is not None
    accepted_id = page(api, job_id)["events"][0]["event_id"]
    assert callback_idempotency_key(accepted_intent) == f"job-event:{job_id}:{accepted_id}"
    assert accepted_intent.state == "pending"
    assert accepted_intent.max_attempts == 8
    assert callback_event_id(accepted_intent) == accepted_id
    assert accepted_intent.kind == "job.requested"
    # On the event's own item, and no copy: the body (and its target) come from the job when
    # it is sent.
    assert stored["sk"] == "EVT#0000000001"
    assert not {"event", "callback_url", "labels"} & set(stored)
    page(api, job_id)
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    page(api, job_id)
    page(api, job_id)
    intents = callback_intents(rt, job_id)
    assert [intent["kind"] for intent in intents] == ["job.requested", "job.outcome_failed"]


def test_a_terminal_job_page_is_never_empty_and_at_never_decreases(
    api: Api, rt: Runtime, clock: Clock
) -> None:
    job_id = submit(api)
    # State times that go backwards must not make event times go backwards.
    mark_running(rt, job_id, at=clock.now - 10_000, lease_until=clock.now)
    mark_failed(rt, job_id, at=clock.now - 20_000, reason="network_error")
    body = page(api, job_id)
    ats = [event["at"] for event in body["events"]]
    assert ats == sorted(ats)
    assert types(body) == ["job.accepted", "job.started", "job.failed"]


def test_events_are_not_materialised_by_job_reads(api: Api, rt: Runtime, clock: Clock) -> None:
    job_id = submit(api)
    mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    api.get(f"/jobs/{job_id}")
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.event_count == 1
    page(api, job_id)
    record = rt.store.get_job(job_id)
    assert record is not None
    assert record.event_count == 2


def test_foreign_event_ids_are_no_ops(api: Api, rt: Runtime, clock: Clock) -> None:
    ours = submit(api)
    # Ids carry the event's time: two jobs' events share an id only if they share a millisecond.
    clock.advance(7)
    theirs = submit(api, idempotency_key="another-key")
    for job_id in (ours, theirs):
        mark_failed(rt, job_id, at=clock.advance(1_000), reason="no_candidate")
    their_events = page(api, theirs)["events"]
    assert len(page(api, ours)["events"]) == len(their_events) == 2  # both streams written
    # Same shape and an existing sequence here, but another job's event: nothing moves.
    result = ack(api, ours, their_events[-1]["event_id"])
    assert (result["acked"], result["unacked"]) == (0, 2)
    replay = page(api, ours, f"?after={their_events[0]['event_id']}")
    assert types(replay) == ["job.accepted", "job.failed"]
    own = page(api, ours)["events"]
    assert types(page(api, ours, f"?after={own[0]['event_id']}")) == ["job.failed"]
    assert ack(api, ours, own[0]["event_id"])["acked"] == 1
