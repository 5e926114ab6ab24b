"""Property tests of the event stream invariants (design §3 I1-I4) over random histories."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import boto3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstream.protocol.events import TERMINAL_KINDS
from jobstream.runtime import Runtime
from jobstream.service import admission, jobs
from jobstream.service import events as stream
from jobstream.store.jobs import JobStore
from jobstream.store.sweep_index import record_legacy_shards_retired
from jobstream_local.resources import create_tables
from jobstream_local.template import Template
from tests.support.event_ids import parse_event_id
from tests.support.harness import Clock, canonical_task
from tests.support.state import mark_failed, mark_running, mark_succeeded

TERMINAL_TYPES = {"job.succeeded", "job.failed", "job.expired", "job.cancelled"}
TERMINAL_STATUSES = {"cancelled", "succeeded", "failed", "expired"}

operations = st.lists(
    st.one_of(
        st.tuples(st.just("page"), st.integers(0, 8), st.booleans()),
        st.tuples(st.just("ack"), st.integers(-1, 8)),
        st.tuples(st.just("run"), st.integers(-5_000, 5_000)),
        st.tuples(
            st.just("finish"), st.sampled_from(["succeeded", "no_candidate", "queued_too_long"])
        ),
        st.tuples(st.just("cancel")),
        st.tuples(st.just("replay")),
        st.tuples(st.just("tick"), st.integers(0, 60_000)),
    ),
    max_size=14,
)


class Scenario:
    """One job driven through a history, checking the invariants after every step."""

    def __init__(self, rt: Runtime) -> None:
        table = f"prop-{uuid.uuid4().hex[:10]}"
        create_tables(Template.load(), boto3.client("dynamodb"), name_for=lambda _: table)
        record_legacy_shards_retired(boto3.client("dynamodb"), table, now=0)
        self.clock = Clock()
        settings = rt.settings.model_copy(update={"table_name": table})
        self.rt = replace(rt, settings=settings, store=JobStore(table), clock=self.clock)
        self.task = canonical_task()
        _, body = admission.submit(self.rt, "acme", self.task, None)
        self.job_id: str = body["job"]["job_id"]
        self.started = self.finished = False
        self.best_ack = 0
        self.seen: dict[str, dict[str, Any]] = {}

    def apply(self, operation: tuple[Any, ...]) -> None:
        getattr(self, f"do_{operation[0]}")(*operation[1:])

    def _event_id(self, index: int) -> str:
        """A real event id seen so far, or (past them) one that names nothing of this job."""
        known = sorted(self.seen, key=lambda event_id: int(event_id.rsplit("-", 1)[1]))
        return known[index] if 0 <= index < len(known) else f"evt-0-{index}"

    def do_page(self, position: int, unacked: bool) -> None:
        query = {"unacked": ["1"]} if unacked else {"after": [self._event_id(position)]}
        page = stream.events_page(self.rt, "acme", self.job_id, query, None)
        for event in page["events"]:
            # I3: an event id always names the same event.
            known = self.seen.setdefault(event["event_id"], event)
            assert (known["type"], known["at"]) == (event["type"], event["at"])

    def do_ack(self, target: int) -> None:
        body = {"ack_through": self._event_id(target)}
        result = stream.acknowledge(self.rt, "acme", self.job_id, body, None)
        # I4: monotonic, never negative, and the totals add up.
        assert result["acked"] >= self.best_ack
        self.best_ack = result["acked"]
        record = self.rt.store.get_job(self.job_id)
        assert record is not None
        assert result["acked"] + result["unacked"] == record.event_count

    def do_run(self, offset: int) -> None:
        if not self.started and not self.finished:
            now = self.clock.now
            mark_running(self.rt, self.job_id, at=now + offset, lease_until=now + 60_000)
            self.started = True

    def do_finish(self, outcome: str) -> None:
        if self.finished:
            return
        if outcome == "succeeded":
            mark_succeeded(self.rt, self.job_id, at=self.clock.now)
        else:
            status = "expired" if outcome == "queued_too_long" else "failed"
            mark_failed(self.rt, self.job_id, at=self.clock.now, reason=outcome, status=status)
        self.finished = True

    def do_cancel(self) -> None:
        document = jobs.cancel(self.rt, "acme", self.job_id, None)
        assert document["status"] in TERMINAL_STATUSES
        self.finished = True

    def do_replay(self) -> None:
        status, _ = admission.submit(self.rt, "acme", self.task, None)
        assert status == 200

    def do_tick(self, ms: int) -> None:
        self.clock.advance(ms)

    def check_final(self) -> None:
        events = stream.events_page(self.rt, "acme", self.job_id, {}, None)["events"]
        types = [event["type"] for event in events]
        # I1: never empty; a terminal job has exactly one terminal event, and it is the last.
        assert types[0] == "job.accepted"
        terminal = [t for t in types if t in TERMINAL_TYPES]
        assert len(terminal) == (1 if self.finished else 0)
        if terminal:
            assert types[-1] == terminal[0]
        # I2: each lifecycle kind at most once.
        assert len(types) == len(set(types))
        # I3: ordered by (at, sequence); at never decreases.
        sequences = [parse_event_id(event["event_id"], self.job_id) for event in events]
        assert sequences == sorted(sequences)
        ats = [event["at"] for event in events]
        assert ats == sorted(ats)
        record = self.rt.store.get_job(self.job_id)
        assert record is not None
        recorded_terminal = [kind for kind in record.recorded_kinds if kind in TERMINAL_KINDS]
        assert len(recorded_terminal) == len(terminal)


@settings(
    max_examples=30,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=operations)
def test_stream_invariants_hold_for_any_history(rt: Runtime, history: list[Any]) -> None:
    scenario = Scenario(rt)
    for operation in history:
        scenario.apply(operation)
    scenario.check_final()
