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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from itertools import chain, islice
from typing import Final, TypeVar

from jobstream import observability
from jobstream.config.settings import Settings
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
    # Overdue queued jobs not sent again: the work queue holds at least as many messages, and
    # their dispatch is younger than the re-dispatch bound.
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
    # Ended jobs taken off the open jobs by the sweep, not by their last commit or their terminal
    # callback's attempt (a writer died in between, or the callback's attempt failed to).
    ended_jobs_released: int = 0
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
    if not hand_off(rt, [ref], intent.tenant):
        return resent  # not sent: still due, the next sweep sends it
    # Look again only after a delivery had a fair chance to take it.
    rt.callbacks.postpone(ref, now=now, due=now + callback_coverage.resend_wait_ms(intent, now))
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
    # The last job the pass looked at: where the next sweep resumes if the budget runs out.
    last: JobRecord | None = None


def _reconcile_open_jobs(
    rt: Runtime, report: SweepReport, waiting: set[str], in_time: Callable[[], bool]
) -> bool:
    """Visit the open jobs, from where the last sweep's pass stopped round to there again; then
    send again what the pass found lost, the budget spent or not. True when it went round.

    With more open jobs than one sweep's budget visits (a flood, thousands waiting for a slot)
    a pass that always began at the oldest would never reach the others; resumed, each open job
    is visited within (open jobs / jobs a sweep visits) + 1 sweeps. The cursor is an item of the
    table (store/sweep_index.py), not the function's warm memory: a cold start, a concurrent
    instance or the CLI's sweep resumes from it too (one read by a sweep that finds an open job,
    one write when the pass stops short or goes round from it).
    """
    seen = _OpenJobs(waiting)
    start, open_jobs = _open_jobs_from(rt, report)
    went_round = _visit_open_jobs(rt, report, seen, open_jobs, in_time)
    _redispatch_lost(rt, report, seen)
    if went_round and start is not None:
        _move_open_jobs_cursor(rt, report, None)  # the next pass starts at the oldest
    elif not went_round and seen.last is not None:
        _move_open_jobs_cursor(rt, report, seen.last)
    return went_round


def _open_jobs_from(rt: Runtime, report: SweepReport) -> tuple[str | None, Iterator[str]]:
    """Where the pass starts (None: at the oldest), and the open jobs from there round."""
    oldest = rt.store.active_jobs()
    first = next(oldest, None)
    if first is None:
        return None, oldest  # no open job: an idle sweep reads no cursor
    start = _open_jobs_cursor(rt, report)
    if start is None:
        return None, chain([first], oldest)
    # After where the last pass stopped to the newest, then the oldest up to there.
    return start, chain(rt.store.active_jobs(after=start), rt.store.active_jobs(before=start))


def _visit_open_jobs(
    rt: Runtime,
    report: SweepReport,
    seen: _OpenJobs,
    open_jobs: Iterator[str],
    in_time: Callable[[], bool],
) -> bool:
    """Check each of `open_jobs` in turn; False when the budget ran out first."""
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
            seen.last = record
    return True


def _open_jobs_cursor(rt: Runtime, report: SweepReport) -> str | None:
    try:
        return rt.store.open_jobs_cursor()
    except Exception:
        # The pass starts at the oldest instead: nothing is missed, only visited late.
        logger.exception("sweep could not read where its last pass over open jobs stopped")
        report.errors += 1
        return None


def _move_open_jobs_cursor(rt: Runtime, report: SweepReport, last: JobRecord | None) -> None:
    try:
        rt.store.move_open_jobs_cursor(last, now=rt.clock())
    except Exception:
        # The next pass starts where this one did: it visits the same jobs again first.
        logger.exception("sweep could not record where its pass over open jobs stopped")
        report.errors += 1


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


def redispatch_bound_ms(record: JobRecord, settings: Settings) -> int:
    """How old a queued job's last dispatch may grow before the sweep sends it again, whatever
    the work queue holds: half the time the job may wait queued, to its `queued_too_long`
    verdict or its deadline, whichever comes first (7.5 minutes by default: the deadline's
    15), so that a lost message is sent again well before the job expires."""
    waits = settings.queued_timeout_ms
    if record.deadline_at is not None:
        waits = min(waits, record.deadline_at - record.created_at)
    return max(HANDOFF_GRACE_MS, waits // 2)


def _redispatch_lost(rt: Runtime, report: SweepReport, seen: _OpenJobs) -> None:
    """Send overdue queued jobs again, each on its own: one whose last dispatch is older than
    `redispatch_bound_ms` always; a younger one while the work queue holds fewer messages than
    there are overdue jobs (some message must be lost), those dispatched longest ago first.

    A backlog (workers at their cap) leaves many jobs queued long after their dispatch with
    their messages waiting in the queue, and sending those again at every sweep would only
    multiply them: the queue's depth, less the messages running jobs hold, lets a re-send come
    sooner than the bound, never later. It cannot tell which messages are lost, and it counts
    every tenant's: while another tenant keeps a backlog it would hide a lost job until it
    expired. Past the bound a job is sent again on its own age, its dispatch recorded, so it is
    sent again at most once a bound: a job that waits in a backlog until its verdict gets one
    copy. A copy is harmless (the claim is conditional); it costs a worker invocation."""
    if not seen.overdue:
        return
    now = rt.clock()
    oldest = sorted(seen.overdue, key=_last_sent_at)
    missing = _lost_by_depth(rt, seen)
    again = [
        record
        for index, record in enumerate(oldest)
        if index < missing
        or now - _last_sent_at(record) >= redispatch_bound_ms(record, rt.settings)
    ]
    report.redispatches_held_back += len(oldest) - len(again)
    for record in again:
        try:
            _redispatch(rt, record, now, report)
        except Exception:
            # One job's failure must not starve the rest; it is still overdue next sweep.
            logger.exception("sweep could not re-send a job", extra={"job_id": record.job_id})
            report.errors += 1


def _lost_by_depth(rt: Runtime, seen: _OpenJobs) -> int:
    """How many of the overdue jobs have no message in the work queue, at least: all of them
    when its depth cannot be read (a copy is harmless, waiting might not be)."""
    try:
        depth = rt.work_queue.depth()
    except Exception:
        logger.warning("could not read the work queue's depth", exc_info=True)
        depth = None
    if depth is None:
        return len(seen.overdue)
    return len(seen.overdue) - max(0, depth - seen.leased)


def _redispatch(rt: Runtime, record: JobRecord, now: int, report: SweepReport) -> None:
    if not dispatch(rt, [JobDispatch(record.job_id, record.tenant)]):
        report.errors += 1  # not recorded: still overdue, the next sweep sends it again
        return
    report.jobs_redispatched += 1
    # Recorded after the send, so that a send that failed is not taken for one; False when
    # the job left `queued` meanwhile (the copy is harmless).
    rt.store.mark_dispatched(record.job_id, now=now)


def _last_sent_at(record: JobRecord) -> int:
    return record.dispatched_at or record.created_at


def _check_job(rt: Runtime, record: JobRecord, report: SweepReport, seen: _OpenJobs) -> None:
    """One open job, as the sweep's batch read found it."""
    job_id = record.job_id
    report.jobs_checked += 1
    now = rt.clock()
    if record.is_terminal:
        _check_ended(rt, record, report, now)
        return
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


def _check_ended(rt: Runtime, record: JobRecord, report: SweepReport, now: int) -> None:
    """An ended job still among the open jobs: its terminal callback not yet closed, or its
    stream not known complete. What its state implies and its stream lacks is recorded first
    (a job ended by a writer that wrote no event); then it leaves the open jobs once nothing
    needs its cover (callback_coverage.look_after_ended)."""
    before = record.event_count
    record = reconcile(rt, record)
    report.events_repaired += record.event_count - before
    left, given = callback_coverage.look_after_ended(rt, record, now)
    report.ended_jobs_released += left
    if given is not None:
        # Due at once, as the hand-off pass would have found it: sent now, not a sweep later.
        report.callbacks_resent += _resend(rt, given.ref, given, now)


def _look_after_run(
    rt: Runtime, record: JobRecord, now: int, report: SweepReport, seen: _OpenJobs
) -> None:
    """An open job without a verdict: overdue for a worker, running, or run again."""
    if _dispatch_overdue(record, now) and record.job_id not in seen.waiting:
        seen.overdue.append(record)
    elif record.status is JobStatus.RUNNING:
        if record.lease_active(now):
            seen.leased += 1
        else:
            _rerun(rt, record, now, report)


def _rerun(rt: Runtime, record: JobRecord, now: int, report: SweepReport) -> None:
    """A running job whose worker stopped (its lease lapsed, no outcome kept) runs again as its
    next attempt: its slot is given back at once (the next run takes one like any job) and a
    message sent, once per lapse. The send is recorded after it happened (`dispatched_at` past
    the lapse): one that failed, or that SQS listed as failed, is sent by the next sweep, not
    left to the queue's visibility timeout (90 minutes) of the dead worker's message. A copy
    (overlapping sweeps, a crash before the record) is harmless: the take-over is conditional."""
    lapsed = record.lease_expires_at
    if lapsed is None or (record.dispatched_at or 0) >= lapsed:
        return  # sent for this lapse already
    resource = resources.of_job(rt, record)
    if resource is not None:
        resources.give_back(rt, resource, record.job_id)
    if not dispatch(rt, [JobDispatch(record.job_id, record.tenant)]):
        report.errors += 1  # not recorded: the next sweep sends it again
        return
    report.jobs_rerun += 1
    # False when another sweep recorded it first or the job moved on: the copy is harmless.
    rt.store.mark_rerun_dispatched(record.job_id, lapsed_lease=lapsed, now=now)


def _dispatch_overdue(record: JobRecord, now: int) -> bool:
    return record.status is JobStatus.QUEUED and now - _last_sent_at(record) >= HANDOFF_GRACE_MS
