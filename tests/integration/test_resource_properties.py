"""The slot invariants of a shared resource under any order of takes and releases (Hypothesis,
against the real store on moto): never more holders than `max_concurrent`; never a waiter left
behind while a slot is free; every job that waited is sent exactly when it is granted a slot,
oldest first; and once every holder gave its slot back, nobody waits."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from jobstream.config.targets import ResourceLimits
from jobstream.domain import JobRecord, JobStatus
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import resources

JOBS = 6


class Sent:
    """The work queue: each job sent must hold its slot already (granted, then sent)."""

    def __init__(self, holds: Callable[[str], bool]) -> None:
        self.holds = holds
        self.jobs: list[str] = []

    def send(self, dispatches: list[JobDispatch]) -> int:
        for dispatch in dispatches:
            assert self.holds(dispatch.job_id), f"{dispatch.job_id} sent without its slot"
            self.jobs.append(dispatch.job_id)
        return len(dispatches)


def record(job_id: str, created_at: int) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        tenant="acme",
        job_type="candidate_search",
        idempotency_key=job_id,
        params={},
        params_canonical="{}",
        target_id="t",
        status=JobStatus.QUEUED,
        created_at=created_at,
        updated_at=created_at,
    )


steps = st.lists(
    st.tuples(st.sampled_from(["take", "give_back"]), st.integers(0, JOBS - 1)),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(max_concurrent=st.integers(1, 3), per_minute=st.sampled_from([None, 60]), steps=steps)
def test_slots_are_never_over_given_and_no_waiter_is_left_behind(
    rt: Runtime, max_concurrent: int, per_minute: int | None, steps: list[tuple[str, int]]
) -> None:
    """Any takes and give-backs: never more holders than the limit, no waiter behind a free
    slot, waiters oldest first; on a paced resource every turn taken with a slot is its own,
    an interval after the one before."""
    resource = resources.JobResource(
        f"prop-{uuid.uuid4().hex[:8]}",
        ResourceLimits(max_concurrent=max_concurrent, per_minute=per_minute),
    )
    turns: list[int] = []
    store = rt.store.resources()
    sent = Sent(lambda job_id: job_id in store.state(resource.name).holders)
    srt = replace(rt, work=sent)  # type: ignore[arg-type]
    records = [record(f"job-{n}", 1_000 + n) for n in range(JOBS)]
    for action, index in steps:
        job = records[index]
        if action == "take":
            slot = resources.take_slot(srt, resource, job)
            if slot is not None and slot.first_turn is not None:
                assert per_minute is not None
                start = slot.first_turn.start
                assert not turns or start >= turns[-1] + 60_000 // per_minute
                turns.append(start)
        else:
            resources.give_back(srt, resource, job.job_id)
        holders = set(store.state(resource.name).holders)
        waiting = store.waiting_jobs(resource.name)
        assert len(holders) <= max_concurrent
        # A slot free while someone waits would leave that job queued with no message.
        assert len(holders) == max_concurrent or not waiting
        assert not holders & set(waiting)  # granted jobs left the queue
        assert waiting == sorted(waiting, key=lambda job_id: int(job_id.split("-")[1]))
    waited = set(store.waiting_jobs(resource.name))
    # Releasing every slot wakes every waiter in turn; what is left is a free resource.
    while holders := list(store.state(resource.name).holders):
        for holder in holders:
            resources.give_back(srt, resource, holder)
    assert store.waiting_jobs(resource.name) == []
    assert waited <= set(sent.jobs)  # each job that was still waiting was sent its message
