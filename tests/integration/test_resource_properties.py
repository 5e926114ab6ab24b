"""The slot invariants of a shared resource under any order of takes and releases (Hypothesis,
against the real store on moto): never more holders than `max_concurrent`; never a waiter left
behind while a slot is free; every job that waited is sent exactly when it is granted a slot,
oldest first; and once every holder gave its slot back, nobody waits. And the pace's: under any
order of reservations and back-offs, with another worker's write landing between a
reservation's read and its write, turns keep their interval and the back-off."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from jobstream.config.targets import ResourceLimits
from jobstream.domain import JobRecord, JobStatus
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import resources
from jobstream.store.resources import ResourceStore

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


INTERVAL_MS = 1_000
pace_steps = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "back_off"]),
        st.integers(0, 3 * INTERVAL_MS),  # how far the clock moves first (or the back-off's length)
        st.sampled_from([None, "reserve", "back_off"]),  # what lands between read and write
    ),
    min_size=1,
    max_size=20,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=pace_steps)
def test_turns_keep_their_interval_and_the_back_off_whatever_lands_between_read_and_write(
    rt: Runtime, steps: list[tuple[str, int, str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reservations, back-offs (another worker's 429) and, between a reservation's read and its
    write, another worker's reservation or back-off: every turn is its own, an interval from
    every other, and none starts before a back-off set before it was taken."""
    store = rt.store.resources()
    name = f"pace-{uuid.uuid4().hex[:8]}"
    now = 1_790_000_000_000
    turns: list[int] = []
    latest_back_off = 0
    race: list[str] = []  # the operation to land after the next read, once
    read = ResourceStore.state

    def back_off(until: int) -> None:
        nonlocal latest_back_off
        store.back_off(name, until=until, reason="rate limited")
        latest_back_off = max(latest_back_off, until)

    def reserve() -> None:
        turn = store.reserve_request(name, interval_ms=INTERVAL_MS, now=now)
        assert turn is not None  # one racing write never exhausts the tries
        assert turn >= max(now, latest_back_off)
        turns.append(turn)

    def raced(self: ResourceStore, resource: str, *, consistent: bool = True) -> Any:
        state = read(self, resource, consistent=consistent)
        if race:
            landing = race.pop()
            if landing == "reserve":
                reserve()
            else:
                back_off(now + 2 * INTERVAL_MS)
        return state

    monkeypatch.setattr(ResourceStore, "state", raced)
    for action, amount, landing in steps:
        if action == "back_off":
            back_off(now + amount)
            continue
        now += amount
        race[:] = [landing] if landing else []
        reserve()
    ordered = sorted(turns)
    assert all(later - earlier >= INTERVAL_MS for earlier, later in itertools.pairwise(ordered))
