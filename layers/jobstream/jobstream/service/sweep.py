"""The scheduled sweep: repairs whatever a crash left half-done, oldest first, within a budget.

Its cost follows the backlog (open callbacks due, jobs without a terminal event), never the
table: each is read from the sparse sweep index, over all its shards, oldest first.

Its phases (due callbacks, held endpoints, open jobs) each get a share of the budget: an equal
part of what is left when the phase starts, with the phases after it. One phase's backlog,
however large, stops that phase only: the later ones still run, and it resumes next sweep.
Held endpoints are taken in turn, a page each, every one before any gets a second page; an
endpoint whose backlog outlasts a page goes to the back of the list for the next sweep.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from itertools import islice
from typing import Final, TypeVar

from jobstream import observability
from jobstream.domain import (
    OPEN_CALLBACK_STATES,
    CallbackRecord,
    CallbackState,
    Endpoint,
    IntentRef,
    JobRecord,
    JobStatus,
)
from jobstream.lifecycle.log import reconcile, settle_last_event
from jobstream.protocol.errors import EXPIRY_REASONS, Reason
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import callback_coverage, endpoints, resources
from jobstream.service.completion import land_kept_outcome
from jobstream.service.handoff import dispatch, hand_off
from jobstream.service.liveness import expire, verdict
from jobstream.store.ports import HANDOFF_GRACE_MS

logger = logging.getLogger(__name__)
K = TypeVar("K")
V = TypeVar("V")

# Open jobs and due callbacks read to a request (BatchGetItem's most), not one after another.
READ_BATCH: Final = 100


@dataclass
class SweepReport:
    callbacks_resent: int = 0
    # Parked callbacks sent again: a paused endpoint's probe, a resumed one's backlog.
    callbacks_unparked: int = 0
    jobs_checked: int = 0
    jobs_redispatched: int = 0
    # Overdue queued jobs not sent again: the work queue holds at least as many messages.
    redispatches_held_back: int = 0
    # Running jobs whose worker stopped (their lease lapsed): sent again as the next attempt.
    jobs_rerun: int = 0
    # Shared resources: slots taken back from holders that are gone, waiters sent a slot.
    slots_reclaimed: int = 0
    waiters_woken: int = 0
    outcomes_landed: int = 0
    events_repaired: int = 0
    # Open jobs' last events their writers died before writing, written from the job's
    # description (store/pending.py).
    events_settled: int = 0
    errors: int = 0
    budget_exhausted: bool = False
    # Jobs the sweep ended `expired`, by its verdict.
    expired: Counter[Reason] = field(default_factory=Counter)

    def counts(self) -> dict[str, int | bool]:
        """Flat, for logs and the operator: every verdict is named, counted or not."""
        counts: dict[str, int | bool] = {
            entry.name: getattr(self, entry.name)
            for entry in fields(self)
            if entry.name != "expired"
        }
        counts.update({reason.value: self.expired[reason] for reason in sorted(EXPIRY_REASONS)})
        return counts

    @property
    def did_work(self) -> bool:
        """Something was repaired, expired or re-sent, failed, or left for the next sweep
        (visiting open jobs that need nothing is not work)."""
        return self.budget_exhausted or any(
            value for name, value in self.counts().items() if name != "jobs_checked"
        )


def sweep(
    rt: Runtime, *, budget_ms: int | None = None, monotonic: Callable[[], float] = time.monotonic
) -> SweepReport:
    """Re-send callbacks nobody delivered in time; then, for each job still open, issue its
    liveness verdict, re-send its dispatch if it was lost, and record missing events."""
    budget = rt.settings.sweep_budget_ms if budget_ms is None else budget_ms
    started = monotonic()
    deadline = started + budget / 1000
    report = SweepReport()
    _retire_legacy_shards(rt, report)
    waiting = _look_after_resources(rt, report)
    phases: list[Callable[[Callable[[], bool]], bool]] = [
        lambda in_time: _resend_due_callbacks(rt, report, in_time),
        lambda in_time: _look_after_endpoints(rt, report, in_time),
        lambda in_time: _reconcile_open_jobs(rt, report, waiting, in_time),
    ]
    for index, phase in enumerate(phases):
        # Every phase runs, within its share: one that runs out never skips the later ones.
        finished = phase(_share(monotonic, deadline, phases_left=len(phases) - index))
        report.budget_exhausted = report.budget_exhausted or not finished
    observability.duration_ms("sweep_duration_ms", (monotonic() - started) * 1000)
    # An idle sweep runs every minute (every few seconds locally): it says nothing at INFO.
    logger.log(
        logging.INFO if report.did_work else logging.DEBUG,
        "sweep finished",
        extra={"sweep": report.counts()},
    )
    return report


def _share(
    monotonic: Callable[[], float], deadline: float, *, phases_left: int
) -> Callable[[], bool]:
    """Whether a phase starting now is still within its share: an equal part of the budget
    left, with the `phases_left - 1` after it (a phase that ends early leaves them its time)."""
    now = monotonic()
    ends = now + max(0.0, deadline - now) / phases_left
    return lambda: monotonic() < ends


def _retire_legacy_shards(rt: Runtime, report: SweepReport) -> None:
    """Until the sweep index's shards of the earlier release are found empty, every sweep looks
    (store/sweep_index.py); they are read with the rest meanwhile, so nothing waits on this."""
    try:
        rt.callbacks.retire_legacy_shards(now=rt.clock())
    except Exception:
        logger.exception("sweep could not look at the legacy sweep shards")
        report.errors += 1


def _resend_due_callbacks(rt: Runtime, report: SweepReport, in_time: Callable[[], bool]) -> bool:
    """True when every due callback was handled; False when the budget ran out first."""
    now = rt.clock()
    due = rt.callbacks.due(now=now)
    while refs := list(islice(due, READ_BATCH)):
        if not in_time():
            return False
        intents = _read_batch(rt.callbacks.get_many, rt.callbacks.get, refs, report)
        for ref in refs:
            if not in_time():
                return False
            try:
                report.callbacks_resent += _resend(rt, ref, intents.get(ref), now)
            except Exception:
                # One intent's failure must not starve the rest; it is still due next sweep.
                logger.exception("sweep could not re-send a callback", extra={"job_id": ref.job_id})
                report.errors += 1
    return True


def _read_batch(
    read_many: Callable[[list[K]], dict[K, V]],
    read_one: Callable[[K], V | None],
    wanted: list[K],
    report: SweepReport,
) -> dict[K, V]:
    """One batch read of what the sweep looks at next. Should it fail, each item is read on
    its own, so that one that cannot be read (counted) does not hold back the others; it is
    still there for the next sweep."""
    try:
        return read_many(wanted)
    except Exception:
        logger.exception("sweep could not read a batch of its backlog; reading it item by item")
        report.errors += 1
    found: dict[K, V] = {}
    for key in wanted:
        try:
            value = read_one(key)
        except Exception:
            logger.exception("sweep could not read an item of its backlog")
            report.errors += 1
            continue
        if value is not None:
            found[key] = value
    return found


def _resend(rt: Runtime, ref: IntentRef, intent: CallbackRecord | None, now: int) -> int:
    if intent is None or intent.state not in OPEN_CALLBACK_STATES:
        return 0
    # Its job has ended (a terminal callback covers the job's others): those too.
    resent = _resend_covered(rt, intent, now) if callback_coverage.covers_job(intent) else 0
    if intent.state == CallbackState.IN_FLIGHT and (intent.lease_until or 0) >= now:
        # An attempt is under way (a claim does not move the due time): look again next time.
        return resent
    hand_off(rt, [ref], intent.tenant)
    # Look again only after a delivery had a fair chance to take it.
    rt.callbacks.postpone(ref, now=now, due=now + HANDOFF_GRACE_MS)
    return resent + 1


def _resend_covered(rt: Runtime, intent: CallbackRecord, now: int) -> int:
    job = rt.store.get_job_item(intent.job_id)
    if job is None or job.created_at > intent.created_at:
        return 0  # the job is gone: so are its callbacks
    return callback_coverage.resend_unindexed(rt, job, now)


def _look_after_endpoints(rt: Runtime, report: SweepReport, in_time: Callable[[], bool]) -> bool:
    """Paused endpoints' due probes and resumed ones' backlogs (service/endpoints.py), in turn:
    one look (a page of a backlog) each, oldest due first; then a page more for each whose
    page came back full, round after round, as far as the phase's share goes. An endpoint whose
    page came back full goes to the back of the list for the next sweep (`requeue`): a backlog
    of thousands is drained over sweeps without holding back a probe or another backlog."""
    now = rt.clock()
    held = rt.endpoints.held(now=now)
    backlogs: deque[Endpoint] = deque()
    moved: set[Endpoint] = set()
    while True:
        # Every held endpoint gets its first look before any gets a second page.
        endpoint = next(held, None) or (backlogs.popleft() if backlogs else None)
        if endpoint is None:
            return True
        if not in_time():
            return False
        try:
            sent = endpoints.look_after(rt, endpoint, now=now)
        except Exception:
            # One endpoint's failure must not starve the rest; it is still held next sweep.
            logger.exception("sweep could not look after a callback endpoint")
            report.errors += 1
            continue
        report.callbacks_unparked += sent
        if sent == endpoints.DRAIN_PAGE:
            if endpoint not in moved:
                moved.add(endpoint)
                _to_the_back(rt, endpoint, now, report)
            backlogs.append(endpoint)


def _to_the_back(rt: Runtime, endpoint: Endpoint, now: int, report: SweepReport) -> None:
    """A backlog that outlasts a page: the endpoint is due after every one due at this sweep,
    so the next sweep looks at those first."""
    try:
        rt.endpoints.requeue(endpoint, due=now + 1)
    except Exception:
        # It keeps its place: the drain goes on, only the next sweep's order is not fairer.
        logger.exception("sweep could not move a callback endpoint to the back of its list")
        report.errors += 1


def _look_after_resources(rt: Runtime, report: SweepReport) -> set[str]:
    """Shared resources' slots and waiters (service/resources.py); the jobs that wait for a
    slot or hold a fresh grant: no message of theirs is lost."""
    found = resources.ResourceReport()
    try:
        resources.look_after(rt, found)
    except Exception:
        logger.exception("sweep could not look after the shared resources")
        report.errors += 1
    report.slots_reclaimed += found.slots_reclaimed
    report.waiters_woken += found.waiters_woken
    return found.waiting


@dataclass
class _OpenJobs:
    """What the pass over open jobs saw, for the re-dispatch decided after it."""

    waiting: set[str]
    # Queued jobs a while after their dispatch, no worker yet: perhaps their message is lost.
    overdue: list[JobRecord] = field(default_factory=list)
    # Running jobs under a live lease: each holds a received message the queue still counts.
    leased: int = 0


def _reconcile_open_jobs(
    rt: Runtime, report: SweepReport, waiting: set[str], in_time: Callable[[], bool]
) -> bool:
    seen = _OpenJobs(waiting)
    open_jobs = rt.store.active_jobs()
    while job_ids := list(islice(open_jobs, READ_BATCH)):
        if not in_time():
            return False
        records = _read_batch(rt.store.get_job_items, rt.store.get_job_item, job_ids, report)
        _settle_unwritten(rt, list(records.values()), report)
        for job_id in job_ids:
            if not in_time():
                return False
            record = records.get(job_id)
            if record is None:
                continue
            try:
                _check_job(rt, record, report, seen)
            except Exception:
                # One job's failure must not starve the rest; it is retried next sweep.
                logger.exception("sweep could not reconcile a job", extra={"job_id": job_id})
                report.errors += 1
    _redispatch_lost(rt, report, seen)
    return True


def _settle_unwritten(rt: Runtime, records: list[JobRecord], report: SweepReport) -> None:
    """Write the last event of each open job whose writer died before writing it: its next
    commit or a page would, but a job may wait long for either (a queued job behind a busy
    resource), and its callback and feed entry with it. Descriptions older than the hand-off
    grace only (a live writer's put is milliseconds away), their events read in one batch."""
    now = rt.clock()
    described = [
        record
        for record in records
        if record.pending_event is not None and record.last_event_at <= now - HANDOFF_GRACE_MS
    ]
    if not described:
        return
    try:
        unwritten = rt.store.unwritten_events(described)
    except Exception:
        # The pass over open jobs goes on; these are read again next sweep.
        logger.exception("sweep could not read open jobs' last events")
        report.errors += 1
        return
    for record in unwritten:
        try:
            report.events_settled += settle_last_event(rt, record)
        except Exception:
            logger.exception("sweep could not write a job's event", extra={"job_id": record.job_id})
            report.errors += 1


def _redispatch_lost(rt: Runtime, report: SweepReport, seen: _OpenJobs) -> None:
    """Send overdue queued jobs again, as many as messages may be lost: a backlog (workers at
    their cap) leaves many jobs queued long after their dispatch with their messages waiting in
    the queue, and sending those again would only multiply them. The work queue's depth, less
    the messages running jobs hold, is how many of the overdue still have one; the rest are sent
    again, those dispatched longest ago first. Which messages are lost the queue cannot tell: a
    job sent again in another's place is served by its first message and its copy is harmless,
    and the lost one is sent once the backlog has drained below its count."""
    if not seen.overdue:
        return
    try:
        depth = rt.work_queue.depth()
    except Exception:
        # Unknown: sending again is safe (a duplicate is harmless), waiting might not be.
        logger.warning("could not read the work queue's depth", exc_info=True)
        depth = None
    missing = len(seen.overdue)
    if depth is not None:
        missing -= max(0, depth - seen.leased)
    report.redispatches_held_back += len(seen.overdue) - max(0, missing)
    if missing <= 0:
        return
    now = rt.clock()
    oldest = sorted(seen.overdue, key=lambda record: record.dispatched_at or record.created_at)
    for record in oldest[:missing]:
        if rt.store.mark_dispatched(record.job_id, now=now):
            # A duplicate is harmless: the claim is conditional.
            dispatch(rt, [JobDispatch(record.job_id, record.tenant)])
            report.jobs_redispatched += 1


def _check_job(rt: Runtime, record: JobRecord, report: SweepReport, seen: _OpenJobs) -> None:
    """One open job, as the sweep's batch read found it."""
    job_id = record.job_id
    report.jobs_checked += 1
    now = rt.clock()
    reason = verdict(record, now, rt.settings)
    # A run finished but neither its completion nor the work message's redelivery recorded
    # it (its lease ended with its outcome kept): the job ends with that outcome, never with a
    # verdict instead of it.
    landed = None if record.lease_active(now) else land_kept_outcome(rt, record)
    if landed is not None:
        report.outcomes_landed += int(landed != "lost")  # "lost": another landed it first
        record = rt.store.get_job_item(job_id) or record
    elif reason is not None:
        expired = expire(rt, record, reason, now)
        if expired is not None:
            report.expired[reason] += 1
        record = rt.store.get_job_item(job_id) or record
    else:
        _look_after_run(rt, record, now, report, seen)
    before = record.event_count
    record = reconcile(rt, record)
    report.events_repaired += record.event_count - before
    # Its callbacks without an entry of their own are the job's to cover while it is open.
    report.callbacks_resent += callback_coverage.resend_unindexed(rt, record, now)


def _look_after_run(
    rt: Runtime, record: JobRecord, now: int, report: SweepReport, seen: _OpenJobs
) -> None:
    """An open job without a verdict: overdue for a worker, running, or run again."""
    if _dispatch_overdue(record, now) and record.job_id not in seen.waiting:
        seen.overdue.append(record)
    elif record.status is JobStatus.RUNNING:
        if record.lease_active(now):
            seen.leased += 1
        elif _rerun(rt, record, now):
            report.jobs_rerun += 1


def _rerun(rt: Runtime, record: JobRecord, now: int) -> bool:
    """A running job whose worker stopped (its lease lapsed, no outcome kept) runs again as its
    next attempt: its slot is given back at once (the next run takes one like any job) and a
    message sent, once per lapse (a duplicate is harmless: the take-over is conditional)."""
    lapsed = record.lease_expires_at
    if lapsed is None or not rt.store.mark_rerun_dispatched(
        record.job_id, lapsed_lease=lapsed, now=now
    ):
        return False
    resource = resources.of_job(rt, record)
    if resource is not None:
        resources.give_back(rt, resource, record.job_id)
    dispatch(rt, [JobDispatch(record.job_id, record.tenant)])
    return True


def _dispatch_overdue(record: JobRecord, now: int) -> bool:
    sent_at = record.dispatched_at or record.created_at
    return record.status is JobStatus.QUEUED and now - sent_at >= HANDOFF_GRACE_MS
