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
from typing import Final

from jobstream import observability
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
from jobstream.service.completion import (
    CompletionDeferredError,
    complete,
    land_kept_outcome,
)
from jobstream.service.messages import parse_or_drop
from jobstream.store.ports import StaleJobError, budgets

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


def _claim(rt: Runtime, record: JobRecord, owner: str) -> JobRecord | None:
    """queued -> running with a fresh lease and `job.started`, in one transaction; or a running
    job whose lease has ended (its worker gave it up, or is gone) taken over."""
    if record.status is JobStatus.RUNNING:
        if record.lease_owner == owner:
            return record  # this owner's own claim
        return None if record.lease_active(rt.clock()) else _take_over(rt, record, owner)
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


def _take_over(rt: Runtime, record: JobRecord, owner: str) -> JobRecord | None:
    """Resume a running job whose lease has ended under a lease of `owner`'s: the job's one
    execution goes on (no second start, the same attempt), like a heartbeat of a new owner."""
    change = transitions.take_over(record, owner, clock=rt.clock(), lease_ms=rt.settings.lease_ms)
    if not rt.store.take_over(record.job_id, change):
        fresh = rt.store.get_job_item(record.job_id)
        if fresh is None or fresh.status is not JobStatus.RUNNING or fresh.lease_owner != owner:
            return None  # another worker took it, or it ended
        return fresh  # ours: the answer of the write was lost, its retry refused
    observability.bind(correlation_id=record.correlation_id)
    return change.update.applied_to(record)


class Lease:
    """The running job's lease: heartbeats in the background, progress, and the stop signal."""

    def __init__(self, rt: Runtime, record: JobRecord, owner: str) -> None:
        self.rt = rt
        self.record = record
        self.owner = owner
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._last_progress_at: int | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    def __enter__(self) -> Lease:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        interval = self.rt.settings.heartbeat_interval_ms / 1000
        while not self._stop.wait(interval):
            if not self.beat():
                return

    def beat(self) -> bool:
        """One heartbeat; False once the lease is lost (the executor stops at its next
        checkpoint). A heartbeat that fails is not a lost lease: the next one may succeed."""
        try:
            alive = self.rt.store.renew_lease(
                self.record.job_id,
                self.owner,
                now=self.rt.clock(),
                lease_ms=self.rt.settings.lease_ms,
            )
        except Exception:
            logger.exception("heartbeat failed", extra={"job_id": self.record.job_id})
            return True
        if not alive:
            # Cancelled, expired or taken over.
            self.lost.set()
        return alive

    def checkpoint(self) -> None:
        if self.lost.is_set():
            raise JobInterruptedError("the job was cancelled or its lease was lost")
        deadline = self.record.deadline_at
        if deadline is not None and self.rt.clock() >= deadline:
            raise DeadlineReachedError(f"the job passed its deadline ({deadline})")

    def before_source_request(self) -> None:
        # The resource gate replaces this: until then a request waits for nothing but may stop.
        self.checkpoint()

    def progress(self, stage: str, message: str | None = None) -> None:
        """A `job.progress` event, at most one per 5 s and 50 per job; the rest is dropped."""
        with self._lock:
            now = self.rt.clock()
            recent = self._last_progress_at is not None and (
                now - self._last_progress_at < PROGRESS_MIN_INTERVAL_MS
            )
            if recent or self.record.progress_events >= MAX_PROGRESS_EVENTS:
                return
            self._last_progress_at = now
            self._record_progress(stage, message, now)

    def _record_progress(self, stage: str, message: str | None, now: int) -> None:
        record = self.record
        # Kept on the job item, within its growth budget, and on the event (`store/budgets.py`).
        stage = budgets.clip_bytes(stage, budgets.MAX_PROGRESS_STAGE_BYTES) or stage
        message = budgets.clip_bytes(message, budgets.MAX_PROGRESS_MESSAGE_BYTES)
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
    """Claim, run and complete one job; or land the outcome a run of it kept. Returns what
    happened, for logs and tests."""
    owner = owner or uuid.uuid4().hex
    record = rt.store.get_job_item(job_id)
    if record is None:
        return "not-claimed"
    # A run of this job finished and only its completion failed: land that outcome instead.
    landed = land_kept_outcome(rt, record)
    if landed is not None:
        return landed
    claimed = _claim(rt, record, owner)
    if claimed is None:
        return "not-claimed"
    with Lease(rt, claimed, owner) as lease:
        try:
            outcome = run_job(registry.checked_targets(rt.targets()), claimed, lease)
        except DeadlineReachedError:
            outcome = Outcome(
                reason=Reason.EXECUTION_TIMEOUT, message="the job passed its deadline"
            )
        except JobInterruptedError:
            return "interrupted"
        except Exception:
            logger.exception("executor failed", extra={"job_id": job_id})
            outcome = Outcome(reason=Reason.INTERNAL_ERROR, message="internal error")
        claimed = lease.record
    return complete(rt, claimed, owner, outcome)
