"""protocol-reference §8, event stream items 30-42, against the local stack over HTTP."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.conformance._support import (
    SLOW_TARGET,
    Client,
    canonical_task,
    key,
    types,
)
from tests.support.receiver import Receiver

pytestmark = [pytest.mark.stack, pytest.mark.xdist_group("conformance")]


def finished(client: Client, prefix: str, **overrides: Any) -> tuple[str, Any]:
    """A job run to its end on the main stack, and its settled events page."""
    job = client.admit(canonical_task(key(prefix), None, **overrides))
    client.wait_terminal(job["job_id"])
    return job["job_id"], client.settled_events(job["job_id"])


def test_30_first_page_after_submit(main: Client, sink: Receiver) -> None:
    job = main.admit(canonical_task(key("ref-30"), sink.url))
    body = main.events(job["job_id"])
    assert body["job_id"] == job["job_id"]
    assert isinstance(body["server_time"], int)
    # The job runs at once: the page may already hold later events, all unacked; one committed
    # while the page was read is counted, and then the page says more follow.
    if "next_after" in body:
        assert body["next_after"] == body["events"][-1]["event_id"]
        assert body["unacked"] > len(body["events"])
    else:
        assert body["unacked"] == len(body["events"])
    event = body["events"][0]
    assert event["type"] == "job.accepted"
    assert event["protocol_version"] == "1"
    assert event["job_id"] == job["job_id"]
    assert event["correlation_id"] == "review-chain:135"
    assert isinstance(event["at"], int)
    assert event["at"] > 0
    assert re.fullmatch(r"evt-\d+-\d+", event["event_id"])
    assert "job.requested" not in types(body)
    assert event["payload"]["detail"] == {"internal_kind": "job.requested"}


def test_31_events_and_ack_need_the_bearer(main: Client) -> None:
    job = main.admit(canonical_task(key("ref-31"), None))
    events = main.call("GET", f"/jobs/{job['job_id']}/events", schema="EventPage", token=None)
    assert events.status == 401
    ack = main.call(
        "POST",
        f"/jobs/{job['job_id']}/events/ack",
        {"ack_through": "evt-1-1"},
        schema="AckResult",
        token=None,
    )
    assert ack.status == 401


def test_32_events_of_an_unknown_job(main: Client) -> None:
    response = main.call("GET", "/jobs/does-not-exist/events", schema="EventPage")
    assert response.status == 404
    assert response.body["error"]["code"] == "invalid_params"


def test_33_started_event_and_after_cursor(multi: Client) -> None:
    job = multi.admit(canonical_task(key("ref-33"), None, params={"target_id": SLOW_TARGET}))
    try:
        multi.wait_running(job["job_id"])
        first = multi.events(job["job_id"])
        assert types(first)[:2] == ["job.accepted", "job.started"]
        stamps = [event["at"] for event in first["events"]]
        assert stamps == sorted(stamps)
        after = multi.events(job["job_id"], after=first["events"][0]["event_id"])
        later = multi.events(job["job_id"])
        assert types(after)[0] == "job.started"  # exclusive
        assert after["events"] == later["events"][1 : len(after["events"]) + 1]
        # `unacked` counts from the ack cursor (none yet), not from `after`.
        assert len(first["events"]) <= after["unacked"] <= len(later["events"])
    finally:
        multi.cancel(job["job_id"])


def test_34_ack_of_the_last_event(main: Client) -> None:
    job_id, page = finished(main, "ref-34")
    count = len(page["events"])
    last = page["events"][-1]["event_id"]
    result = main.ack(job_id, last)
    assert (result["acked"], result["unacked"]) == (count, 0)
    assert isinstance(result["server_time"], int)
    again = main.ack(job_id, last)
    assert (again["acked"], again["unacked"]) == (count, 0)
    unacked = main.events(job_id, unacked=True)
    assert (unacked["events"], unacked["unacked"]) == ([], 0)
    assert main.events(job_id)["events"] == page["events"]


def test_35_acks_that_do_not_move_the_cursor(main: Client) -> None:
    # (The reference's "internal-only row" case has no counterpart: every row we keep is projected.)
    job_id, page = finished(main, "ref-35")
    events = page["events"]
    count = len(events)
    assert count >= 2
    unknown = main.ack(job_id, "evt-99999999999-999999")
    assert (unknown["acked"], unknown["unacked"]) == (0, count)
    assert main.events(job_id)["unacked"] == count
    second = main.ack(job_id, events[1]["event_id"])
    assert (second["acked"], second["unacked"]) == (2, count - 2)
    rewind = main.ack(job_id, events[0]["event_id"])
    assert (rewind["acked"], rewind["unacked"]) == (2, count - 2)
    ancient = main.ack(job_id, "evt-1-1")
    assert (ancient["acked"], ancient["unacked"]) == (2, count - 2)


@pytest.mark.parametrize("body", [{}, {"ack_through": ""}, {"ack_through": 42}])
def test_36_bad_ack_bodies(main: Client, body: Any) -> None:
    job_id, page = finished(main, "ref-36")
    response = main.call("POST", f"/jobs/{job_id}/events/ack", body, schema="AckResult")
    assert response.status == 400
    assert response.body["error"]["code"] == "invalid_params"
    assert main.events(job_id)["unacked"] == len(page["events"])


def test_36_bad_unacked_query(main: Client) -> None:
    job = main.admit(canonical_task(key("ref-36q"), None))
    response = main.call("GET", f"/jobs/{job['job_id']}/events?unacked=maybe", schema="EventPage")
    assert response.status == 400
    assert response.body["error"]["code"] == "invalid_params"


def test_37_ack_never_changes_the_job(main: Client) -> None:
    job_id, page = finished(main, "ref-37")
    before = main.job(job_id)
    main.ack(job_id, page["events"][-1]["event_id"])
    assert main.job(job_id) == before


def test_38_failed_job(main: Client) -> None:
    # We have no delivery outcome: a job fails with `no_candidate` when nothing matches.
    job_id, page = finished(main, "ref-38", params={"query": {"tags": ["no-such-tag-anywhere"]}})
    kinds = types(page)
    assert kinds[:2] == ["job.accepted", "job.started"]
    assert kinds[-1] == "job.failed"
    assert set(kinds[2:-1]) <= {"job.progress"}
    terminal = page["events"][-1]
    assert terminal["payload"]["detail"] == {"internal_kind": "job.outcome_failed"}
    assert terminal["payload"]["job"]["status"] == "failed"
    error = terminal["payload"]["error"]
    assert error["code"] == "no_candidate"
    main.ack(job_id, terminal["event_id"])
    after = main.events(job_id)
    assert types(after)[-1] == "job.failed"
    assert after["unacked"] == 0
    assert main.events(job_id)["events"] == after["events"] == page["events"]


def test_39_expired_job(multi: Client) -> None:
    # `queued_too_long` needs a queued budget of at least 60 s (and workers take a job within
    # ~1 s); the expiry reachable black-box is the execution deadline of a slow job.
    job = multi.admit(
        canonical_task(key("ref-39"), None, deadline_ms=1_000, params={"target_id": SLOW_TARGET})
    )
    done = multi.wait_terminal(job["job_id"], timeout=20)
    assert done["status"] == "expired", done
    page = multi.settled_events(job["job_id"])
    kinds = types(page)
    assert kinds[0] == "job.accepted"
    assert kinds[-1] == "job.expired"
    terminal = page["events"][-1]
    assert terminal["payload"]["detail"] == {"internal_kind": "job.outcome_expired"}
    assert terminal["payload"]["job"]["status"] == "expired"
    assert terminal["payload"]["error"]["code"] == "deadline_exceeded"
    assert done["error"]["code"] == "deadline_exceeded"


def test_40_succeeded(main: Client) -> None:
    _, page = finished(main, "ref-40")
    assert "job.succeeded" in types(page)
    last = page["events"][-1]
    assert last["type"] == "job.succeeded"
    assert last["payload"]["job"]["status"] == "succeeded"
    assert "result" in last["payload"]
    assert "error" not in last["payload"]


def test_41_cancel_shows_in_the_stream(multi: Client) -> None:
    job = multi.admit(canonical_task(key("ref-41"), None, params={"target_id": SLOW_TARGET}))
    response = multi.cancel(job["job_id"])
    assert response.status in (200, 202)
    page = multi.events(job["job_id"])
    assert "job.cancelled" in types(page)


def test_42_no_callback_no_intent(main: Client, sink: Receiver) -> None:
    task = canonical_task(key("ref-42"), None, params={"query": {"tags": ["no-such-tag"]}})
    task["callback_url"] = None
    job = main.admit(task)
    assert main.wait_terminal(job["job_id"])["error"]["code"] == "no_candidate"
    page = main.settled_events(job["job_id"])
    kinds = types(page)
    assert kinds[0] == "job.accepted"
    assert kinds[-1] == "job.failed"
    assert page["unacked"] == len(kinds)
    time.sleep(0.5)
    posted_for_job = [r for r in sink.requests if job["job_id"] in r.body]
    assert posted_for_job == []
