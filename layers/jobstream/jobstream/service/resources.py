"""Shared resources: slots for jobs, a pace and a back-off for their source requests.

A job on a target with a resource (config/targets.py) runs only while it holds one of the
resource's `max_concurrent` slots (store/resources.py). A job that finds every slot held waits in
the resource's queue, still `queued`: its message is done with, no worker holds an invocation
for it, and the release of a slot grants the slot to the oldest waiter and sends it its message.
A slot whose holder is gone (its job ended, its worker's lease lapsed, a grant whose job can no
longer start) is taken back by the sweep (`look_after`), which also wakes waiters a lost message
left behind. A grant is not taken back for being slow to be taken up: a backlog on the work queue
may hold its message for minutes, and a slot handed on meanwhile would leave that message to
find every slot held again (a livelock ending jobs `queued_too_long`). Once a grant is
GRANT_TIMEOUT_MS old, its job counts as any queued job overdue for a worker: the sweep's job pass
sends it again if its message may be lost (as many as the work queue cannot account for).

Source requests wait for their turn (`wait_turn`): never before the resource's back-off, and,
with `per_minute`, one every 60,000 / per_minute ms across all workers. The first request's
turn is taken with the job's slot, in the same write (`take_slot`). A rate limit (429) or a
Retry-After backs the whole resource off (`back_off`), for every job using it, including jobs
already waiting for their turn: a job that waited looks at the back-off again before it sends.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from jobstream import observability
from jobstream.config.targets import ResourceLimits
from jobstream.domain import SLOT_WAIT_STAGE, JobRecord, JobStatus
from jobstream.jobtypes import registry
from jobstream.jobtypes.base import Outcome
from jobstream.protocol.errors import Reason
from jobstream.queue import JobDispatch
from jobstream.retries import transient
from jobstream.runtime import Runtime
from jobstream.service import liveness
from jobstream.service.handoff import dispatch
from jobstream.store.ports import Turn, Waiter

logger = logging.getLogger(__name__)

# A waiter granted a slot is sent its message; a grant still not taken up this long after it
# may have lost that message, and the sweep may send it again. The slot stays the job's until it
# ends or can no longer start (its deadline or its queued budget passed: `liveness.verdict`).
GRANT_TIMEOUT_MS: Final = 120_000
# A rate limit that names no Retry-After keeps the resource backed off this long.
DEFAULT_BACKOFF_MS: Final = 30_000
# Waits for a turn are slept in slices, each after a checkpoint (cancel, lease, deadline).
WAIT_SLICE_MS: Final = 1_000
# How far ahead of its slot's take a job's first request's turn is reserved (on a paced
# resource): its claim comes between. A request later than its turn takes a new one, since
# the next turn is an interval after it; the turn is never early, so the pace holds.
TURN_LEAD_MS: Final = 200


@dataclass(frozen=True, slots=True)
class JobResource:
    """The shared resource a job runs against, with its limits as configured now."""

    name: str
    limits: ResourceLimits


def of_job(rt: Runtime, record: JobRecord) -> JobResource | None:
    """The resource `record`'s target runs against; None for a job that runs unlimited."""
    found = registry.resource_of(
        registry.checked_targets(rt.targets()), record.job_type, record.target_id
    )
    return JobResource(*found) if found is not None else None


@dataclass(frozen=True, slots=True)
class Slot:
    """A slot the job holds, and the turn its first source request took with it (a paced
    resource: `wait_turn(reserved=)`), None when it took none."""

    first_turn: Turn | None = None


def take_slot(rt: Runtime, resource: JobResource, record: JobRecord) -> Slot | None:
    """The slot once the job holds one of the resource's slots (or already did): on a paced
    resource, its first request's turn is taken in the same write, TURN_LEAD_MS ahead (its
    claim comes first). None when every slot is held: the job waits in the resource's queue,
    and a release sends it again."""
    store = rt.store.resources()
    now = rt.clock()
    interval = resource.limits.request_interval_ms
    if interval is not None:
        taken, turn = store.acquire_with_turn(
            resource.name,
            record.job_id,
            max_concurrent=resource.limits.max_concurrent,
            interval_ms=interval,
            now=now,
            lead_ms=TURN_LEAD_MS,
        )
        if taken:
            return Slot(turn)
    elif _acquire(rt, resource, record.job_id, now):
        return Slot()
    waiter = Waiter(resource.name, record.job_id, record.tenant, record.created_at)
    store.add_waiter(waiter)
    # A slot given back between the refusal and the waiter's write woke nobody: look again.
    if _acquire(rt, resource, record.job_id, now):
        store.remove_waiter(waiter)
        return Slot()
    observability.count("resource_waits", dimension=resource.name)
    limit = resource.limits.max_concurrent
    rt.store.note_waiting(
        record,
        stage=SLOT_WAIT_STAGE,
        message=f"waiting for a slot of {resource.name} ({limit} at a time)",
        now=max(now, record.updated_at),
    )
    return None


def _acquire(rt: Runtime, resource: JobResource, job_id: str, now: int) -> bool:
    return rt.store.resources().acquire(
        resource.name, job_id, max_concurrent=resource.limits.max_concurrent, now=now
    )


def give_back(rt: Runtime, resource: JobResource, job_id: str) -> bool:
    """Release the job's slot, if it holds one, and hand it to the oldest waiter."""
    left = rt.store.resources().release(resource.name, job_id)
    if left is None:
        return False
    observability.count("resource_slots_in_use", left, dimension=resource.name)
    wake(rt, resource, free=resource.limits.max_concurrent - left)
    return True


def wake(rt: Runtime, resource: JobResource, *, free: int) -> list[str]:
    """Grant up to `free` slots to the oldest waiters and send each its message; their jobs."""
    if free <= 0:
        return []
    store = rt.store.resources()
    woken: list[str] = []
    for waiter in store.waiters(resource.name, limit=free):
        # Granted first, sent next, unqueued last: a crash in between leaves the waiter
        # queued and granted, and the next waker (a release, the sweep) sends it again.
        if not _acquire(rt, resource, waiter.job_id, rt.clock()):
            break  # a new job took the slot first; the next release wakes this waiter
        dispatch(rt, [JobDispatch(waiter.job_id, waiter.tenant)])
        store.remove_waiter(waiter)
        woken.append(waiter.job_id)
    return woken


def wait_turn(
    rt: Runtime,
    resource: JobResource,
    checkpoint: Callable[[], None],
    *,
    on_wait: Callable[[str], None] | None = None,
    reserved: Turn | None = None,
) -> None:
    """Return when the job may start its next source request: not before the resource's
    back-off, and in its place in the resource's pace; a back-off set while it waited (another
    worker's 429) is waited out too, then a turn after it. `reserved`: a turn taken already
    (with the job's slot, `take_slot`), used while it is still ahead; a turn passed is taken
    anew. `checkpoint()` is called while waiting (a cancel, a lost lease or the deadline ends
    the wait); `on_wait` is told a long wait. A store failure raises (the run's outcome:
    transient, `execution._run_once`)."""
    store = rt.store.resources()
    backed_off_until = 0
    held = reserved.start if reserved is not None and reserved.start >= rt.clock() else None
    # A turn passed unused: the next reservation takes its interval back if nobody took a
    # later one (the request goes now, not an interval after its own missed turn).
    passed = reserved if held is None else None
    while True:
        # A turn taken with the slot read the back-off then: it is looked at again below.
        read_just_now = held is None
        turn = (
            held
            if held is not None
            else store.reserve_request(
                resource.name,
                interval_ms=resource.limits.request_interval_ms,
                now=rt.clock(),
                replacing=passed,
            )
        )
        if turn is None:
            # No turn reserved (the pace moved under every try): never a request without one.
            # One interval later the pace has moved on; a passed turn may still be taken back.
            pause(resource.limits.request_interval_ms or WAIT_SLICE_MS, checkpoint, rt.sleep)
            continue
        held = passed = None
        # An unpaced reservation's read may be staler than the back-off this job saw waiting.
        start = max(turn, backed_off_until)
        wait_ms = start - rt.clock()
        if on_wait is not None and wait_ms > WAIT_SLICE_MS:
            on_wait(f"waiting {wait_ms / 1000:.1f} s for {resource.name}'s rate limit")
        pause(wait_ms, checkpoint, rt.sleep)
        if wait_ms <= 0 and read_just_now:
            return  # no wait: the reservation read the back-off just now
        # Another worker's 429 may have backed the resource off while this one waited: its
        # request waits that out too, then for a turn after it. A read a moment stale is fine
        # after a wait that began with a read; a turn taken with the slot reads consistently.
        state = store.state(resource.name, consistent=not read_just_now)
        backed_off_until = state.retry_not_before
        if backed_off_until <= max(start, rt.clock()):
            return


def give_back_turn(rt: Runtime, resource: JobResource | None, turn: Turn | None) -> None:
    """A turn taken with the slot that no request used (the claim failed, the run made no
    request): the pace moves back to it unless a later turn was taken. Best effort, whatever
    fails: a turn not given back only leaves its interval unused, and this runs as a run ends,
    whose outcome must still be completed."""
    interval = resource.limits.request_interval_ms if resource is not None else None
    if resource is None or turn is None or interval is None:
        return
    try:
        rt.store.resources().give_back_turn(resource.name, turn=turn, interval_ms=interval)
    except Exception:
        logger.warning(
            "could not give an unused turn back", extra={"resource": resource.name}, exc_info=True
        )


def pause(wait_ms: int, checkpoint: Callable[[], None], sleep: Callable[[float], None]) -> None:
    """Sleep `wait_ms` in slices, each after a checkpoint, then check once more. Counted in
    slices, not against the clock: a clock that stands still (a test's) never hangs a wait."""
    slices = max(0, math.ceil(wait_ms / WAIT_SLICE_MS))
    for index in range(slices):
        checkpoint()
        sleep(min(WAIT_SLICE_MS, wait_ms - index * WAIT_SLICE_MS) / 1000)
    checkpoint()


def back_off(rt: Runtime, resource: JobResource, outcome: Outcome) -> int | None:
    """After a rate limit or a Retry-After, no request on the resource starts before the time
    returned, for every job using it; None when the outcome asks for no back-off."""
    limited = outcome.reason is Reason.RATE_LIMITED
    if not limited and outcome.retry_after_ms is None:
        return None
    if limited:
        observability.count("resource_rate_limited", dimension=resource.name)
    wait = outcome.retry_after_ms if outcome.retry_after_ms is not None else DEFAULT_BACKOFF_MS
    until = rt.clock() + wait
    reason = "rate limited" if limited else "Retry-After"
    try:
        extended = rt.store.resources().back_off(resource.name, until=until, reason=reason)
    except Exception as error:
        if transient(error) is None:
            raise
        # The back-off is for the other jobs' sake (this one's retry waits its Retry-After
        # anyway): a store failing for a moment must not end the run; the next 429 sets it.
        logger.warning("could not back the resource off", extra={"resource": resource.name})
        return until
    if extended:
        observability.count("resource_backoffs", dimension=resource.name)
        logger.warning(
            "resource backed off",
            extra={"resource": resource.name, "until": until, "why": reason},
        )
    return until


def report(rt: Runtime) -> list[dict[str, object]]:
    """Every resource as it is now, for the operator: its limits, its slots and their holders,
    its waiters, its pace and its back-off."""
    rows: list[dict[str, object]] = []
    now = rt.clock()
    store = rt.store.resources()
    for name, limits in sorted(registry.resources(registry.checked_targets(rt.targets())).items()):
        state = store.state(name)
        rows.append(
            {
                "resource": name,
                "max_concurrent": limits.max_concurrent,
                "per_minute": limits.per_minute,
                "slots_in_use": len(state.holders),
                "holders": sorted(state.holders),
                "waiting": len(store.waiting_jobs(name)),
                "backed_off_ms": max(0, state.retry_not_before - now),
                "backoff_reason": state.backoff_reason if state.retry_not_before > now else None,
                "next_request_in_ms": max(0, state.next_request_at - now),
            }
        )
    return rows


@dataclass
class ResourceReport:
    """What the sweep did for the shared resources, and what the job pass must know."""

    slots_reclaimed: int = 0
    waiters_woken: int = 0
    # Jobs that wait for a slot (their message is done with: not lost), hold a grant younger
    # than GRANT_TIMEOUT_MS (its message is on its way) or run.
    waiting: set[str] = field(default_factory=set)


def look_after(rt: Runtime, report: ResourceReport) -> None:
    """For every resource: take back slots whose holders are gone, then wake waiters."""
    for name, limits in registry.resources_in_use(registry.checked_targets(rt.targets())).items():
        try:
            _look_after_one(rt, JobResource(name, limits), report)
        except Exception:
            # One resource's failure must not starve the rest; it is looked at next sweep.
            logger.exception("sweep could not look after a resource", extra={"resource": name})


def _look_after_one(rt: Runtime, resource: JobResource, report: ResourceReport) -> None:
    store = rt.store.resources()
    state = store.state(resource.name)
    now = rt.clock()
    held = 0
    # The holders' jobs read together (a resource holds at most a few hundred slots).
    jobs = rt.store.get_job_items(list(state.holders)) if state.holders else {}
    for job_id, since in state.holders.items():
        record = jobs.get(job_id)
        if record is None or _holder_gone(rt, record, since, now):
            # Only the entry as read: a worker that took the slot up since keeps it.
            if store.release(resource.name, job_id, held_since=since) is not None:
                report.slots_reclaimed += 1
                observability.count("resource_slots_reclaimed", dimension=resource.name)
                logger.warning(
                    "reclaimed a slot whose holder is gone",
                    extra={"resource": resource.name, "job_id": job_id},
                )
            continue
        held += 1
        if record.status is JobStatus.RUNNING or now - since < GRANT_TIMEOUT_MS:
            report.waiting.add(job_id)
    woken = wake(rt, resource, free=resource.limits.max_concurrent - held)
    report.waiters_woken += len(woken)
    # Just granted and sent: the job pass must not send them again on their age.
    report.waiting.update(woken)
    report.waiting.update(store.waiting_jobs(resource.name))


def _holder_gone(rt: Runtime, record: JobRecord, since: int, now: int) -> bool:
    """A slot is its holder's while its job runs under a live lease, or, granted, until the job
    can no longer start: however slow its message (module doc). A running job whose lease
    lapsed is sent again to run as its next attempt (the sweep's re-run): a slot it took under
    that lease is its dead worker's, one granted since (`since` past the lapse) its re-run's."""
    if record.is_terminal:
        return True
    if record.status is JobStatus.RUNNING:
        if record.lease_active(now):
            return False
        if since < (record.lease_expires_at or 0):
            return True
    # Past its deadline, its queued budget or its stall bound: the job pass's verdict ends it,
    # never a run.
    return liveness.verdict(record, now, rt.settings) is not None
