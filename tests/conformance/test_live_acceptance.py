"""protocol-reference §8 item 46 (event mapping, as observable) and the consumer-side live
acceptance items 47-50 (`verify-protocol-v1.py --live`).

Skipped: 51 (legacy shim equivalence), jobstream has no legacy routes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance._support import (
    EVENT_TYPES,
    SLOW_TARGET,
    TERMINAL,
    Client,
    canonical_task,
    key,
    types,
)
from tests.support.validation import keys_of

pytestmark = [pytest.mark.stack, pytest.mark.xdist_group("conformance")]


def test_46_every_projected_event_is_a_protocol_type(main: Client, multi: Client) -> None:
    # The internal kind table itself is not observable; what is: every event carries a
    # `job.*` protocol type and its internal kind, and every protocol type is reachable.
    pages: list[Any] = []
    ok = main.admit(canonical_task(key("ref-46-ok"), None))
    failed = main.admit(canonical_task(key("ref-46-no"), None, params={"query": {"tags": ["zz"]}}))
    slow = {"target_id": SLOW_TARGET}
    expired = multi.admit(canonical_task(key("ref-46-ex"), None, deadline_ms=1_000, params=slow))
    cancelled = multi.admit(canonical_task(key("ref-46-ca"), None, params=slow))
    multi.wait_running(cancelled["job_id"])
    multi.cancel(cancelled["job_id"])
    for client, job in ((main, ok), (main, failed), (multi, expired), (multi, cancelled)):
        client.wait_terminal(job["job_id"])
        pages.append(client.settled_events(job["job_id"]))
    seen: set[str] = set()
    for page in pages:
        for event in page["events"]:
            assert event["type"] in EVENT_TYPES
            kind = event["payload"]["detail"]["internal_kind"]
            assert isinstance(kind, str)
            assert kind
            assert kind != event["type"] or kind.startswith("job.")
            seen.add(event["type"])
    assert seen >= EVENT_TYPES - {"job.progress"}, seen


def test_47_capabilities_live(main: Client) -> None:
    capabilities = main.capabilities()
    assert "1" in capabilities["protocol_versions"]
    declaration = next(d for d in capabilities["job_types"] if d["name"] == "candidate_search")
    assert declaration["queued_timeout_ms"] > 0
    assert declaration["stall_timeout_ms"] > 0
    assert declaration["default_deadline_ms"] > 0


def test_48_replay_conflict_and_unknown_job_type(main: Client) -> None:
    idempotency_key = key("ref-48")
    task = canonical_task(idempotency_key, None)
    job = main.admit(task)
    replay = main.submit(task)
    assert replay.body["job"]["job_id"] == job["job_id"]
    extra = canonical_task(idempotency_key, None)
    extra["params"]["query"]["tags"] = [*extra["params"]["query"]["tags"], "botefuku"]
    conflict = main.submit(extra)
    assert conflict.status == 409
    assert conflict.body["error"]["code"] == "idempotency_conflict"
    unknown = main.submit(canonical_task(key("ref-48b"), None, job_type="no_such_job_type"))
    assert unknown.status == 400
    assert unknown.body["error"]["code"]


def test_49_polling_reaches_a_terminal_status(main: Client) -> None:
    job = main.admit(canonical_task(key("ref-49"), None))
    seen = []

    def check(current: dict[str, Any]) -> bool:
        seen.append(current["status"])
        assert current["updated_at"] > 0
        return current["status"] in TERMINAL

    terminal = main.wait_for(job["job_id"], check)  # every poll: 200 and a valid Job
    assert terminal["status"] in TERMINAL
    assert not [name for name in keys_of(terminal) if name.lower().startswith("refetch")]


def test_50_terminal_job_events_and_ack(main: Client) -> None:
    other = main.admit(canonical_task(key("ref-50-other"), None))
    job = main.admit(canonical_task(key("ref-50"), None))
    terminal = main.wait_terminal(job["job_id"])
    page = main.settled_events(job["job_id"])
    assert page["events"]
    assert f"job.{terminal['status']}" in types(page)
    assert {event["job_id"] for event in page["events"]} == {job["job_id"]}
    assert other["job_id"] != job["job_id"]
    stamps = [event["at"] for event in page["events"]]
    assert stamps == sorted(stamps)
    last = page["events"][-1]["event_id"]
    assert main.ack(job["job_id"], last)["unacked"] == 0
    assert main.ack(job["job_id"], last)["unacked"] == 0
    assert main.job(job["job_id"])["status"] == terminal["status"]
