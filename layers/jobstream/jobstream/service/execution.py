"""Running a job: claim it under a lease, keep the lease alive, report progress, complete.

Every move is conditional: a job is claimed only while queued, and only the lease holder may
report progress or complete it, so a cancelled or expired job never gets a later outcome.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import replace
from typing import Final

from jobstream import observability
from jobstream.domain import JobRecord
from jobstream.jobtypes.context import DeadlineReachedError, JobInterruptedError
from jobstream.jobtypes.runner import Outcome, fit_job_result, run_job
from jobstream.protocol.documents import terminal_status_for
from jobstream.protocol.errors import Reason
from jobstream.protocol.events import EventKind
from jobstream.queue import parse_work_message
from jobstream.service.runtime import Runtime
from jobstream.service.stream import record_transition
from jobstream.store import budgets
from jobstream.store.jobs import StaleJobError, StateChange

logger = logging.getLogger("jobstream.execution")

PROGRESS_MIN_INTERVAL_MS: Final = 5_000
MAX_PROGRESS_EVENTS: Final = 50
MAX_COMPLETE_ATTEMPTS: Final = 5


def handle_work_message(rt: Runtime, body: str, message_id: str | None = None) -> str:
    """Run the job a work message names. The lease owner is derived from the message, so a
    redelivery of the same message (its invocation crashed) resumes the job it had claimed;
    another message for the same job finds it claimed and does nothing."""
    observability.bind(job_id=None, correlation_id=None)
    try:
        job_id = parse_work_message(body)
    except ValueError:
        logger.error("dropping a work message that names no job: %.200s", body)  # noqa: TRY400
        return "invalid"
    observability.bind(job_id=job_id)
    return execute(rt, job_id, owner=f"message:{message_id}" if message_id else None)


def claim(rt: Runtime, job_id: str, owner: str) -> JobRecord | None:
    """queued -> running with a fresh lease and `job.started`, in one transaction; or the job
    this owner already holds (its earlier attempt crashed after claiming)."""
    record = rt.store.get_job(job_id)
    if record is not None and record.status == "running" and record.lease_owner == owner:
        return record
    if record is None or record.status != "queued":
        return None
    now = max(rt.clock(), record.updated_at)
    lease_until = now + rt.settings.lease_ms
    running = replace(
        record,
        status="running",
        attempt=record.attempt + 1,
        started_at=record.started_at or now,
        heartbeat_at=now,
        lease_owner=owner,
        lease_expires_at=lease_until,
        progress_stage="searching",
        updated_at=now,
    )
    change = StateChange(
        values={
            "status": "running",
            "attempt": running.attempt,
            "started_at": running.started_at,
            "heartbeat_at": now,
            "lease_owner": owner,
            "lease_expires_at": lease_until,
            "progress_stage": "searching",
            "updated_at": now,
        },
        # A second claim of the same job (a duplicate message) finds it running: a no-op.
        require_status=frozenset({"queued"}),
    )
    try:
        claimed = record_transition(
            rt, record, kind=EventKind.EXECUTION_STARTED, updated=running, change=change
        )
    except StaleJobError:
        return None
    observability.count("jobs_claimed")
    observability.bind(correlation_id=record.correlation_id)
    return claimed


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
            try:
                alive = self.rt.store.renew_lease(
                    self.record.job_id,
                    self.owner,
                    now=self.rt.clock(),
                    lease_ms=self.rt.settings.lease_ms,
                )
            except Exception:
                # A failed heartbeat is not a lost lease; the next one may succeed.
                logger.exception("heartbeat failed", extra={"job_id": self.record.job_id})
                continue
            if not alive:
                # Cancelled, expired or taken over: the executor stops at its next checkpoint.
                self.lost.set()
                return

    def checkpoint(self) -> None:
        if self.lost.is_set():
            raise JobInterruptedError("the job was cancelled or its lease was lost")
        deadline = self.record.deadline_at
        if deadline is not None and self.rt.clock() >= deadline:
            raise DeadlineReachedError(f"the job passed its deadline ({deadline})")

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
        # Kept on the job item, within its growth budget (`store/budgets.py`).
        stage = budgets.clip(stage, budgets.MAX_STAGE_CHARS) or stage
        message = budgets.clip(message)
        at = max(now, record.updated_at)
        updated = replace(
            record,
            progress_stage=stage,
            progress_message=message,
            progress_events=record.progress_events + 1,
            updated_at=at,
        )
        values: dict[str, object] = {
            "progress_stage": stage,
            "progress_events": updated.progress_events,
            "updated_at": at,
        }
        if message:
            values["progress_message"] = message
        change = StateChange(
            values=values,
            remove=() if message else ("progress_message",),
            require_status=frozenset({"running"}),
            require_lease_owner=self.owner,
        )
        try:
            self.record = record_transition(
                self.rt, record, kind=EventKind.PROGRESSED, updated=updated, change=change
            )
        except StaleJobError:
            self._refresh()
        except Exception:
            # Progress is best effort: a failed write must not fail the job. It may have been
            # written with its answer lost, so the next write starts from a fresh read.
            logger.warning("progress not recorded", exc_info=True)
            self._refresh()

    def _refresh(self) -> None:
        try:
            fresh = self.rt.store.get_job(self.record.job_id)
        except Exception:
            logger.warning("could not re-read the job after a progress write", exc_info=True)
            return
        if fresh is None or fresh.status != "running" or fresh.lease_owner != self.owner:
            self.lost.set()
        else:
            self.record = fresh


def execute(rt: Runtime, job_id: str, *, owner: str | None = None) -> str:
    """Claim, run and complete one job. Returns what happened, for logs and tests."""
    owner = owner or uuid.uuid4().hex
    record = claim(rt, job_id, owner)
    if record is None:
        return "not-claimed"
    with Lease(rt, record, owner) as lease:
        try:
            outcome = run_job(rt.targets(), record, lease)
        except DeadlineReachedError:
            outcome = Outcome(
                reason=Reason.EXECUTION_TIMEOUT.value, message="the job passed its deadline"
            )
        except JobInterruptedError:
            return "interrupted"
        except Exception:
            logger.exception("executor failed", extra={"job_id": job_id})
            outcome = Outcome(reason=Reason.INTERNAL_ERROR.value, message="internal error")
        record = lease.record
    return complete(rt, record, owner, outcome)


def within_budget(outcome: Outcome) -> Outcome:
    """The outcome as the job item can hold it (`store/budgets.py`): a result cut by the job
    type's rule to `RESULT_BYTES`, or a failure when not even that fits; messages clipped."""
    if outcome.result is None:
        return Outcome(reason=outcome.reason, message=budgets.clip(outcome.message))
    result = fit_job_result(outcome.result, budgets.result_fits)
    if result is outcome.result:
        return outcome
    observability.count("results_cut")
    if result is None:
        logger.warning("a result too large to keep even cut fails its job")
        return Outcome(
            reason=Reason.INTERNAL_ERROR.value,
            message=f"the result is larger than the {budgets.RESULT_BYTES} bytes a job keeps",
        )
    logger.warning("a result larger than its budget was cut")
    return Outcome(result=result)


def complete(rt: Runtime, record: JobRecord, owner: str, outcome: Outcome) -> str:
    """State and terminal event in one transaction, only while holding the lease."""
    outcome = within_budget(outcome)
    for _ in range(MAX_COMPLETE_ATTEMPTS):
        now = max(rt.clock(), record.updated_at)
        if outcome.result is not None:
            status = "succeeded"
            values: dict[str, object] = {"status": status, "result": outcome.result}
            finished = replace(record, status=status, result=outcome.result)
            kind = EventKind.OUTCOME_SUCCEEDED
        else:
            reason = outcome.reason or Reason.INTERNAL_ERROR.value
            status = terminal_status_for(reason)
            values = {"status": status, "reason": reason}
            if outcome.message:
                values["reason_message"] = outcome.message
            finished = replace(record, status=status, reason=reason, reason_message=outcome.message)
            kind = EventKind.OUTCOME_EXPIRED if status == "expired" else EventKind.OUTCOME_FAILED
        finished = replace(finished, updated_at=now, lease_owner=None, lease_expires_at=None)
        change = StateChange(
            values={**values, "updated_at": now},
            remove=("lease_owner", "lease_expires_at"),
            require_status=frozenset({"running"}),
            require_lease_owner=owner,
        )
        try:
            record_transition(rt, record, kind=kind, updated=finished, change=change)
        except StaleJobError:
            fresh = rt.store.get_job(record.job_id)
            if fresh is None or fresh.status != "running" or fresh.lease_owner != owner:
                return "lost"  # cancelled, expired or taken over: no later outcome
            record = fresh
            continue
        if status == "succeeded":
            observability.count("jobs_succeeded")
        else:
            observability.count("jobs_failed")  # failed, or expired at its deadline
        return status
    return "lost"
