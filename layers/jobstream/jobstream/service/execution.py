"""Running a job: claim it under a lease, keep the lease alive, report progress, complete.

Every move is conditional: a job is claimed only while queued, or taken over once its lease
has ended (released by a run that gave it up, or lapsed with its worker); only the lease holder
may report progress or complete it, so a cancelled or expired job never gets a later outcome.
Each invocation is its own lease owner: two copies of one work message never both run the job.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final

from jobstream import observability
from jobstream.backoff import retry_delay_ms
from jobstream.config.targets import DEFAULT_MAX_ATTEMPTS, TargetsFile
from jobstream.domain import JobRecord, JobStatus
from jobstream.jobtypes import registry
from jobstream.jobtypes.context import DeadlineReachedError, JobInterruptedError
from jobstream.jobtypes.runner import Outcome, run_job
from jobstream.lifecycle import transitions
from jobstream.lifecycle.log import apply_until_settled, give_up
from jobstream.protocol.errors import Reason
from jobstream.queue import QueueMessage, parse_work_message
from jobstream.retries import transient
from jobstream.runtime import Runtime
from jobstream.service import liveness, resources
from jobstream.service.completion import (
    CompletionDeferredError,
    complete,
    land_kept_outcome,
)
from jobstream.service.messages import parse_or_drop
from jobstream.service.resources import JobResource
from jobstream.store.ports import ShownProgress, StaleJobError, Turn, budgets

__all__ = [
    "CompletionDeferredError",
    "Lease",
    "claim",
    "complete",
    "execute",
    "handle_work_batch",
]

logger = logging.getLogger(__name__)

PROGRESS_MIN_INTERVAL_MS: Final = 5_000
MAX_PROGRESS_EVENTS: Final = 50
RETRY_WAIT_STAGE: Final = "retry_wait"
# The wait before a job's next attempt: 2 s, 4 s, 8 s... (jittered) up to 2 minutes, or what the
# source's Retry-After asked for.
RETRY_BASE_MS: Final = 2_000
RETRY_MAX_MS: Final = 120_000
# A message whose run gave its job up (a deferred completion, its lease released) comes back
# this soon (not after the queue's 90 minutes), so the job ends with its kept outcome.
COMPLETION_RETRY_DELAY_MS: Final = 20_000


def handle_work_message(
    rt: Runtime, body: str, message_id: str | None = None, receipt_handle: str | None = None
) -> str:
    """Run the job a work message names, under a lease of this invocation's own: a copy of the
    message (SQS may deliver one twice, even at once) finds the job held and does nothing.
    A message that fails is handed back (a batch item failure) to come back once the lease its
    invocation may hold has ended: its redelivery then lands the outcome a run kept, or takes
    the job over and resumes it. Raises to keep the message."""
    observability.bind(job_id=None, correlation_id=None)
    job_id = parse_or_drop(parse_work_message, body, "job")
    if job_id is None:
        return "invalid"
    observability.bind(job_id=job_id)
    try:
        return execute(rt, job_id)
    except CompletionDeferredError as deferred:
        _come_back(rt, receipt_handle, released=deferred.released)
        raise
    except Exception as error:
        # A batch item failure, not an invocation error: say so here; SQS redelivers it.
        extra = {"message_id": message_id}
        if transient(error) is None:
            logger.exception("work message failed; SQS will deliver it again", extra=extra)
        else:
            logger.warning(
                "work message failed for a transient cause; SQS will deliver it again",
                extra=extra,
            )
        _come_back(rt, receipt_handle, released=False)
        raise


def handle_work_batch(
    rt: Runtime, messages: Sequence[QueueMessage], _remaining_ms: Callable[[], int] | None = None
) -> list[str]:
    """Run each message's job; the ids of the messages SQS must deliver again. A failed message
    (a deferred completion) is a batch item failure, not an invocation error, even when every
    message of the batch failed: with one message per batch, every failure would otherwise be
    one. (Powertools' BatchProcessor did the same, at ~65 ms of cold start: docs/performance.md.)"""
    return [message.message_id for message in messages if not _handled(rt, message)]


def _handled(rt: Runtime, message: QueueMessage) -> bool:
    try:
        handle_work_message(rt, message.body, message.message_id, message.receipt_handle)
    except Exception:  # noqa: BLE001 - handle_work_message logged why; SQS delivers it again
        return False
    return True


def redelivery_delay_ms(rt: Runtime, *, released: bool) -> int:
    """How long a failed work message stays away: 20 s when its run released its lease; else
    until a lease its invocation may hold (a claim whose answer was lost) has lapsed, well
    before the stall verdict, so that its redelivery can take the job over."""
    if released:
        return COMPLETION_RETRY_DELAY_MS
    return rt.settings.lease_ms + COMPLETION_RETRY_DELAY_MS


def _come_back(rt: Runtime, receipt_handle: str | None, *, released: bool) -> None:
    if receipt_handle is None:
        return
    try:
        rt.work_queue.delay(receipt_handle, redelivery_delay_ms(rt, released=released))
    except Exception:
        # The queue's own visibility timeout brings it back later; the sweep is the backstop.
        logger.warning("could not shorten the work message's visibility", exc_info=True)


def claim(rt: Runtime, job_id: str, owner: str) -> JobRecord | None:
    """The job, held by `owner` under a fresh lease; None when another worker holds it or it
    has ended (see `_claim`)."""
    record = rt.store.get_job_item(job_id)
    return _claim(rt, record, owner) if record is not None else None


def _claim(
    rt: Runtime, record: JobRecord, owner: str, max_attempts: int = DEFAULT_MAX_ATTEMPTS
) -> JobRecord | None:
    """queued -> running with a fresh lease and `job.started`, in one commit; or a running
    job whose lease has ended (its worker gave it up, or is gone) taken over as its next
    attempt, or, its attempts spent, ended `expired` (its runs keep dying)."""
    if record.status is JobStatus.RUNNING:
        return _resume(rt, record, owner, max_attempts)
    if record.status is not JobStatus.QUEUED:
        return None
    transition = transitions.claim(
        record,
        owner,
        clock=rt.clock(),
        lease_ms=rt.settings.lease_ms,
        first_stage=registry.first_stage(record.job_type),
    )

    def reread(job_id: str, stale: StaleJobError) -> JobRecord | None:
        # Only a refusal of a retry may hide our own claim: then look.
        return rt.store.get_job_item(job_id) if stale.after_lost_answer else None

    settled = apply_until_settled(rt, record, lambda _: transition, reread=reread)
    if not settled.moved:
        fresh = settled.record
        if fresh.status is JobStatus.RUNNING and fresh.lease_owner == owner:
            return fresh  # our claim was written; only its answer was lost
        return None
    claimed = settled.record
    observability.count("jobs_claimed")
    observability.bind(correlation_id=record.correlation_id)
    return claimed


def _resume(rt: Runtime, record: JobRecord, owner: str, max_attempts: int) -> JobRecord | None:
    if record.lease_owner == owner:
        return record  # this owner's own claim
    if record.lease_active(rt.clock()):
        return None
    if record.attempt >= max_attempts:
        # Its runs keep stopping unfinished (a crash, a timeout, memory): no more of them.
        liveness.expire(rt, record, Reason.STALLED_NO_HEARTBEAT, rt.clock())
        return None
    return _take_over(rt, record, owner)


def _take_over(rt: Runtime, record: JobRecord, owner: str) -> JobRecord | None:
    """Run a running job whose lease has ended again under a lease of `owner`'s, as its next
    attempt (no second start), like a heartbeat of a new owner."""
    change = transitions.take_over(
        record,
        owner,
        clock=rt.clock(),
        lease_ms=rt.settings.lease_ms,
        first_stage=registry.first_stage(record.job_type),
    )
    if not rt.store.take_over(record.job_id, change):
        fresh = rt.store.get_job_item(record.job_id)
        if fresh is None or fresh.status is not JobStatus.RUNNING or fresh.lease_owner != owner:
            return None  # another worker took it, or it ended
        return fresh  # ours: the answer of the write was lost, its retry refused
    observability.bind(correlation_id=record.correlation_id)
    observability.count("jobs_rerun")
    return change.update.applied_to(record)


class Lease:
    """The running job's lease: heartbeats in the background, progress, and the stop signal."""

    def __init__(
        self,
        rt: Runtime,
        record: JobRecord,
        owner: str,
        resource: JobResource | None = None,
        first_turn: Turn | None = None,
    ) -> None:
        self.rt = rt
        self.record = record
        self.owner = owner
        self.resource = resource
        # The turn the job's first source request took with its slot (resources.take_slot).
        self._first_turn = first_turn
        self.lost = threading.Event()
        self._stop = threading.Event()
        # Progress events are spaced from the job's last event: this run's `job.started`; a
        # taken-over run has none of its own, so its first report tells that it runs again.
        self._last_event_at = record.last_event_at
        # The latest report the spacing or the cap kept from being an event: the next
        # heartbeat shows it on the job (stage, message).
        self._unshown: tuple[str, str | None] | None = None
        # Held across each write of progress (an event, a heartbeat showing a report, the
        # retry's event), so that none overwrites a later report with an earlier one.
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def __enter__(self) -> Lease:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        # A run that made no source request leaves the turn it took with its slot to others.
        unused, self._first_turn = self._first_turn, None
        resources.give_back_turn(self.rt, self.resource, unused)

    def _beat(self) -> None:
        interval = self.rt.settings.heartbeat_interval_ms / 1000
        while not self._stop.wait(interval):
            if not self.beat():
                return

    def beat(self) -> bool:
        """One heartbeat, showing the latest report that no event carried; False once the
        lease is lost (the executor stops at its next checkpoint). A heartbeat that fails is
        not a lost lease: the next one may succeed, and shows the report then; but once the
        lease as last renewed has run out, it is lost (`_lapsed`)."""
        with self._lock:
            now = self.rt.clock()
            if self._lapsed(now):
                # Never renewed after it lapsed: the sweep may have taken its slot back and sent
                # the job again; the run stops at its next checkpoint.
                self.lost.set()
                return False
            shown = self._shown_progress(now)
            try:
                alive = self.rt.store.renew_lease(
                    self.record.job_id,
                    self.owner,
                    now=now,
                    lease_ms=self.rt.settings.lease_ms,
                    progress=shown,
                )
            except Exception:
                logger.exception("heartbeat failed", extra={"job_id": self.record.job_id})
                return True
            if not alive:
                # Cancelled, expired or taken over.
                self.lost.set()
                return alive
            # The job as the heartbeat left it: the completion's commit holds only while what
            # the job shows is as this worker last knew it (store/listed.py).
            written: dict[str, Any] = {
                "heartbeat_at": now,
                "lease_expires_at": now + self.rt.settings.lease_ms,
            }
            if shown is not None:
                self._unshown = None
                written |= {
                    "progress_stage": shown.stage,
                    "progress_message": shown.message,
                    "updated_at": shown.updated_at,
                }
            self.record = replace(self.record, **written)
            return alive

    def _shown_progress(self, now: int) -> ShownProgress | None:
        if self._unshown is None:
            return None
        stage, message = self._unshown
        return ShownProgress(stage, message, updated_at=max(now, self.record.updated_at))

    def _lapsed(self, now: int) -> bool:
        """Whether the lease as last renewed has run out: heartbeats that failed (the store
        unreachable, the thread starved) left it to lapse, and the sweep treats the job's worker
        as gone (its slot taken back, the job sent again)."""
        expires_at = self.record.lease_expires_at
        return expires_at is not None and now >= expires_at

    def checkpoint(self) -> None:
        if self.lost.is_set() or self._lapsed(self.rt.clock()):
            self.lost.set()
            raise JobInterruptedError("the job was cancelled or its lease was lost")
        deadline = self.record.deadline_at
        if deadline is not None and self.rt.clock() >= deadline:
            raise DeadlineReachedError(f"the job passed its deadline ({deadline})")

    def before_source_request(self) -> None:
        """Wait for the job's turn at its resource (its back-off, its pace), checking in."""
        if self.resource is None:
            self.checkpoint()
            return
        reserved, self._first_turn = self._first_turn, None
        resources.wait_turn(
            self.rt,
            self.resource,
            self.checkpoint,
            on_wait=lambda message: self.progress(self._stage(), message),
            reserved=reserved,
        )

    def _stage(self) -> str:
        return self.record.progress_stage or registry.first_stage(self.record.job_type)

    def wait_to_retry(self, delay_ms: int, failed: Outcome) -> None:
        """Record the next attempt (`job.progress`, stage retry_wait) and wait `delay_ms` for
        it, heartbeats going on; JobInterruptedError when the job stops meanwhile."""
        reason = failed.reason.value if failed.reason is not None else "a failure"
        message = (
            f"attempt {self.record.attempt} failed ({reason}); attempt "
            f"{self.record.attempt + 1} in {delay_ms / 1000:.1f} s"
        )
        with self._lock:
            transition = transitions.retry(
                self.record,
                self.owner,
                stage=RETRY_WAIT_STAGE,
                message=message,
                clock=self.rt.clock(),
            )
            settled = apply_until_settled(
                self.rt, self.record, lambda _: transition, reread=give_up
            )
            if not settled.moved:
                self.lost.set()  # cancelled, expired or taken over: nothing to retry
            else:
                self.record = settled.record
                # The retry's event is the run's last one, like `job.started` for the first
                # attempt: the next attempt's reports are spaced from it (it said when that
                # attempt starts); a report older than it is not shown after it.
                self._last_event_at = self.record.last_event_at
                self._unshown = None
        resources.pause(delay_ms, self.checkpoint, self.rt.sleep)

    def progress(self, stage: str, message: str | None = None) -> None:
        """A `job.progress` event, no sooner than 5 s after the job's last event (one within
        5 s of `job.started` says nothing the consumer can act on) and at most 50 a job; a
        report kept from being one shows on the job with the next heartbeat instead."""
        # Kept on the job item, within its growth budget, and on the event (`store/budgets.py`).
        stage = budgets.clip_bytes(stage, budgets.MAX_PROGRESS_STAGE_BYTES) or stage
        message = budgets.clip_bytes(message, budgets.MAX_PROGRESS_MESSAGE_BYTES) or None
        with self._lock:
            now = self.rt.clock()
            recent = now - self._last_event_at < PROGRESS_MIN_INTERVAL_MS
            if recent or self.record.progress_events >= MAX_PROGRESS_EVENTS:
                self._unshown = (stage, message)
                return
            self._unshown = None
            self._last_event_at = now
            self._record_progress(stage, message, now)

    def _record_progress(self, stage: str, message: str | None, now: int) -> None:
        record = self.record
        transition = transitions.progress(record, self.owner, stage, message, clock=now)
        try:
            settled = apply_until_settled(self.rt, record, lambda _: transition, reread=give_up)
        except Exception:
            # Progress is best effort: a failed write must not fail the job. It may have been
            # written with its answer lost, so the next write starts from a fresh read.
            logger.warning("progress not recorded", exc_info=True)
            self._refresh()
            return
        if settled.moved:
            self.record = settled.record
        else:
            self._refresh()  # cancelled, expired, taken over, or only behind: look again

    def _refresh(self) -> None:
        try:
            fresh = self.rt.store.get_job_item(self.record.job_id)
        except Exception:
            logger.warning("could not re-read the job after a progress write", exc_info=True)
            return
        if (
            fresh is None
            or fresh.status is not JobStatus.RUNNING
            or fresh.lease_owner != self.owner
        ):
            self.lost.set()
        else:
            self.record = fresh


def execute(rt: Runtime, job_id: str, *, owner: str | None = None) -> str:
    """Claim, run and complete one job; or land the outcome a run of it kept; or, every slot of
    its resource held, leave it waiting for one. Returns what happened, for logs and tests."""
    owner = owner or uuid.uuid4().hex
    record = rt.store.get_job_item(job_id)
    if record is None:
        return "not-claimed"
    resource = resources.of_job(rt, record)
    # A run of this job finished and only its completion failed: land that outcome instead.
    landed = land_kept_outcome(rt, record)
    if landed is not None:
        _give_back(rt, resource, job_id)
        return landed
    if record.is_terminal:
        # A waiter granted a slot after it ended (cancelled while it waited): pass it on.
        _give_back(rt, resource, job_id)
        return "not-claimed"
    slot = resources.take_slot(rt, resource, record) if resource is not None else resources.Slot()
    if slot is None:
        return "waiting"
    targets = registry.checked_targets(rt.targets())
    first_turn = slot.first_turn
    claimed = _claim(rt, record, owner, _max_attempts(targets, record))
    if claimed is None:
        resources.give_back_turn(rt, resource, first_turn)
        _give_back_if_ended(rt, resource, job_id)
        return "not-claimed"
    try:
        with Lease(rt, claimed, owner, resource, first_turn) as lease:
            try:
                outcome = _run_with_retries(rt, targets, lease)
            except JobInterruptedError:
                _give_back_if_ended(rt, resource, job_id)
                return "interrupted"
            claimed = lease.record
        answer = complete(rt, claimed, owner, outcome)
    except Exception:
        # The run is over (its outcome kept, or to be found by the redelivery): free the slot.
        _give_back(rt, resource, job_id)
        raise
    _give_back_after(rt, resource, job_id, answer)
    return answer


def _max_attempts(targets: TargetsFile, record: JobRecord) -> int:
    target = next((target for target in targets.targets if target.id == record.target_id), None)
    return target.max_attempts if target is not None else DEFAULT_MAX_ATTEMPTS


def _run_with_retries(rt: Runtime, targets: TargetsFile, lease: Lease) -> Outcome:
    """The job's outcome: its run's, or, after a transient failure, its next attempt's (after a
    backoff, honouring Retry-After), up to the target's max_attempts and never past the
    deadline. A rate limit or Retry-After backs the job's whole resource off."""
    max_attempts = _max_attempts(targets, lease.record)
    while True:
        outcome = _run_once(targets, lease)
        if not outcome.retryable:
            return outcome
        if lease.resource is not None:
            resources.back_off(rt, lease.resource, outcome)
        record = lease.record
        if record.attempt >= max_attempts:
            return outcome
        delay = retry_delay_ms(
            record.attempt,
            base_ms=RETRY_BASE_MS,
            max_ms=RETRY_MAX_MS,
            retry_after_ms=outcome.retry_after_ms,
        )
        if record.deadline_at is not None and rt.clock() + delay >= record.deadline_at:
            return outcome  # the next attempt could not start before the deadline
        observability.count("job_retries", dimension=str(outcome.reason))
        logger.info(
            "job will run again",
            extra={"attempt": record.attempt + 1, "reason": str(outcome.reason), "delay_ms": delay},
        )
        try:
            lease.wait_to_retry(delay, outcome)
        except DeadlineReachedError:
            return Outcome(reason=Reason.EXECUTION_TIMEOUT, message="the job passed its deadline")


def _run_once(targets: TargetsFile, lease: Lease) -> Outcome:
    """One run's outcome; JobInterruptedError (cancelled, lease lost) propagates."""
    try:
        return run_job(targets, lease.record, lease)
    except DeadlineReachedError:
        return Outcome(reason=Reason.EXECUTION_TIMEOUT, message="the job passed its deadline")
    except JobInterruptedError:
        raise
    except Exception as error:
        failure = transient(error)
        if failure is None:
            logger.exception("executor failed", extra={"job_id": lease.record.job_id})
            return Outcome(reason=Reason.INTERNAL_ERROR, message="internal error")
        # An AWS call of the run (our own store's: a source request's turn) failed for a cause
        # another try may cure, after the client's retries: a transient outcome, run again like
        # a source's 5xx. The protocol has no job-terminal code for the producer's own storage:
        # spent attempts end the job with a retryable source_error, never internal_error.
        logger.warning(
            "executor failed for a transient cause",
            extra={"job_id": lease.record.job_id, "code": failure.code},
            exc_info=True,
        )
        return Outcome(
            reason=Reason.NETWORK_ERROR,
            message=f"an AWS call of the producer failed for a transient cause ({failure.code})",
            transient=True,
        )


def _give_back(rt: Runtime, resource: JobResource | None, job_id: str) -> None:
    """Free the job's slot, if it holds one; a failure leaves it to the sweep."""
    if resource is None:
        return
    try:
        resources.give_back(rt, resource, job_id)
    except Exception:
        logger.warning("could not give a slot back; the sweep will", exc_info=True)


def _give_back_after(
    rt: Runtime, resource: JobResource | None, job_id: str, completion: str
) -> None:
    """Free the slot of a run that completed; one that lost its job (cancelled, expired, or
    taken over after its lease lapsed) frees it only if the job ended: the slot's entry, keyed
    by the job, is the worker's that runs it now."""
    if completion == "lost":
        _give_back_if_ended(rt, resource, job_id)
    else:
        _give_back(rt, resource, job_id)


def _give_back_if_ended(rt: Runtime, resource: JobResource | None, job_id: str) -> None:
    """Free the job's slot once it has ended; a job another worker runs keeps it."""
    if resource is None:
        return
    try:
        fresh = rt.store.get_job_item(job_id)
    except Exception:
        logger.warning(
            "could not read the job to give its slot back; the sweep will", exc_info=True
        )
        return
    if fresh is None or fresh.is_terminal:
        _give_back(rt, resource, job_id)
