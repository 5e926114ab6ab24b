"""protocol-reference §8, callback items 43-45: a real receiver on 127.0.0.1.

The reference asserts its outbox rows; black-box we observe what reaches the receiver:
one POST per event keyed `job-event:<job_id>:<event_id>`, retries after a 503, none after a 404.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.conformance._support import (
    Client,
    canonical_task,
    key,
    same_event,
    types,
    wait_until,
)
from tests.support.receiver import Received, receiver
from tests.support.validation import validate

pytestmark = [pytest.mark.stack, pytest.mark.xdist_group("conformance")]


def posted(requests: list[Received], job_id: str) -> list[tuple[Received, Any]]:
    found = []
    for request in list(requests):
        event = json.loads(request.body)
        if event.get("job_id") == job_id:
            found.append((request, event))
    return found


def test_43_one_callback_per_event_keyed_by_job_and_event(main: Client) -> None:
    with receiver(204) as hook:
        job = main.admit(canonical_task(key("ref-43"), hook.url))
        main.wait_terminal(job["job_id"])
        page = main.settled_events(job["job_id"])
        wait_until(lambda: len(posted(hook.requests, job["job_id"])) >= len(page["events"]))
        # Re-reads (which reconcile) never produce a second delivery.
        for _ in range(3):
            main.events(job["job_id"])
            main.job(job["job_id"])
        time.sleep(1.2)
        deliveries = posted(hook.requests, job["job_id"])
    assert len(deliveries) == len(page["events"])
    by_id = {event["event_id"]: (request, event) for request, event in deliveries}
    assert sorted(by_id) == sorted(event["event_id"] for event in page["events"])
    for pulled in page["events"]:
        request, event = by_id[pulled["event_id"]]
        validate(event, "Event")
        same_event(event, pulled)
        assert (
            request.headers["x-idempotency-key"] == f"job-event:{job['job_id']}:{event['event_id']}"
        )
        assert request.path == "/hooks/jobstream"
    accepted = page["events"][0]
    terminal = page["events"][-1]
    assert accepted["type"] == "job.accepted"
    assert (
        by_id[accepted["event_id"]][0].headers["x-idempotency-key"]
        != (by_id[terminal["event_id"]][0].headers["x-idempotency-key"])
    )


def test_44_delivered_callbacks_do_not_ack(main: Client) -> None:
    with receiver(200) as hook:
        job = main.admit(canonical_task(key("ref-44"), hook.url))
        main.wait_terminal(job["job_id"])
        page = main.settled_events(job["job_id"])
        wait_until(lambda: len(posted(hook.requests, job["job_id"])) >= len(page["events"]))
        time.sleep(0.5)
        deliveries = posted(hook.requests, job["job_id"])
    assert len(deliveries) == len(page["events"])  # exactly one POST per event
    for _, event in deliveries:
        validate(event, "Event")
    # push ≠ ack: every event is still unacked on the pull side.
    again = main.events(job["job_id"], unacked=True)
    assert again["events"] == page["events"]
    assert again["unacked"] == len(page["events"])


def test_45_failing_receivers_retry_on_503_and_give_up_on_404(main: Client) -> None:
    with receiver(503) as busy, receiver(404) as gone:
        retried = main.admit(canonical_task(key("ref-45-503"), busy.url))
        dead = main.admit(canonical_task(key("ref-45-404"), gone.url))
        retried_job = main.wait_terminal(retried["job_id"])
        dead_job = main.wait_terminal(dead["job_id"])
        retried_page = main.settled_events(retried["job_id"])
        dead_page = main.settled_events(dead["job_id"])

        # 503: the accepted event is posted again after the backoff (1-2 s here).
        accepted = retried_page["events"][0]["event_id"]

        def attempts(event_id: str) -> int:
            return sum(
                1
                for _, event in posted(busy.requests, retried["job_id"])
                if event["event_id"] == event_id
            )

        wait_until(lambda: attempts(accepted) >= 2, timeout=8, message="no retry after a 503")
        # 404: each event is posted once and dead at once; no retry within the retry window.
        wait_until(lambda: len(posted(gone.requests, dead["job_id"])) >= len(dead_page["events"]))
        time.sleep(2.5)
        dead_deliveries = posted(gone.requests, dead["job_id"])
    assert sorted(event["event_id"] for _, event in dead_deliveries) == sorted(
        event["event_id"] for event in dead_page["events"]
    )
    # Neither job nor stream changed because of its callbacks.
    assert retried_job["status"] == dead_job["status"] == "succeeded"
    assert main.job(retried["job_id"]) == retried_job
    assert main.job(dead["job_id"]) == dead_job
    assert main.events(retried["job_id"])["events"] == retried_page["events"]
    assert main.events(dead["job_id"])["events"] == dead_page["events"]
    assert types(retried_page)[-1] == "job.succeeded"
