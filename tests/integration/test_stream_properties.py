"""Property tests of the event stream invariants (design §3 I1-I4) over random histories."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstream.protocol.events import TERMINAL_KINDS, parse_event_id
from jobstream.service import admission, jobs, stream
from jobstream.service.runtime import Runtime
from jobstream.store.jobs import JobStore
from jobstream_local.resources import create_tables
from jobstream_local.template import Template
from tests.support.harness import Clock, canonical_task
from tests.support.state import mark_failed, mark_running, mark_succeeded

TERMINAL_TYPES = {"job.succeeded", "job.failed", "job.expired", "job.cancelled"}

operations = st.lists(
    st.one_of(
        st.tuples(st.just("page"), st.integers(0, 8), st.booleans()),
        st.tuples(st.just("ack"), st.integers(-1, 8)),
        st.tuples(st.just("run"), st.integers(-5_000, 5_000)),
        st.tuples(st.just("finish"), st.sampled_from(["succeeded", "no_candidate", "queued_too_long"])),
        st.tuples(st.just("cancel")),
        st.tuples(st.just("replay")),
        st.tuples(st.just("tick"), st.integers(0, 60_000)),
    ),
    max_size=14,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=operations)
def test_stream_invariants_hold_for_any_history(rt: Runtime, history: list[Any]) -> None:
    table = f"prop-{uuid.uuid4().hex[:10]}"
    create_tables(Template.load(), boto3.client("dynamodb"), name_for=lambda _: table)
    clock = Clock()
    settings_for_table = rt.settings.model_copy(update={"table_name": table})
    local = Runtime(settings=settings_for_table, store=JobStore(table), clock=clock)
    task = canonical_task()
    _, body = admission.submit(local, "acme", task, None)
    job_id = body["job"]["job_id"]
    started = finished = False
    best_ack = 0
    seen: dict[str, dict[str, Any]] = {}
    for operation in history:
        name = operation[0]
        if name == "page":
            _, position, unacked = operation
            query = {"unacked": ["1"]} if unacked else {"after": [f"evt-0-{position}"]}
            page = stream.events_page(local, "acme", job_id, query, None)
            for event in page["events"]:
                # I3: an event id always names the same event.
                known = seen.setdefault(event["event_id"], event)
                assert known["type"] == event["type"]
                assert known["at"] == event["at"]
        elif name == "ack":
            target = operation[1]
            result = stream.acknowledge(local, "acme", job_id, {"ack_through": f"evt-0-{target}"}, None)
            # I4: monotonic, never negative, totals add up.
            assert result["acked"] >= best_ack
            best_ack = result["acked"]
            record = local.store.get_job(job_id)
            assert record is not None
            assert result["acked"] + result["unacked"] == record.event_count
        elif name == "run" and not started and not finished:
            mark_running(local, job_id, at=clock.now + operation[1], lease_until=clock.now + 60_000)
            started = True
        elif name == "finish" and not finished:
            outcome = operation[1]
            if outcome == "succeeded":
                mark_succeeded(local, job_id, at=clock.now)
            else:
                status = "expired" if outcome == "queued_too_long" else "failed"
                mark_failed(local, job_id, at=clock.now, reason=outcome, status=status)
            finished = True
        elif name == "cancel":
            document = jobs.cancel(local, "acme", job_id, None)
            finished = True
            assert document["status"] in {"cancelled", "succeeded", "failed", "expired"}
        elif name == "replay":
            status, _ = admission.submit(local, "acme", task, None)
            assert status == 200
        elif name == "tick":
            clock.advance(operation[1])

    events = stream.events_page(local, "acme", job_id, {}, None)["events"]
    types = [event["type"] for event in events]
    # I1: an existing job's page is never empty; a terminal job has exactly one terminal event.
    assert types[0] == "job.accepted"
    terminal = [t for t in types if t in TERMINAL_TYPES]
    assert len(terminal) == (1 if finished else 0)
    if terminal:
        assert types[-1] == terminal[0]
    # I2: each lifecycle kind at most once.
    assert len(types) == len(set(types))
    # I3: ordered by (at, sequence) and at never decreases.
    sequences = [parse_event_id(event["event_id"]) for event in events]
    assert sequences == sorted(sequences)
    ats = [event["at"] for event in events]
    assert ats == sorted(ats)
    record = local.store.get_job(job_id)
    assert record is not None
    assert sum(1 for kind in record.recorded_kinds if kind in TERMINAL_KINDS) == len(terminal)
