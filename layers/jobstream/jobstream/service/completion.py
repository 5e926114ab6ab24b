"""Completing a job: its outcome and terminal event in one transaction, never thrown away.

A run's outcome is known before it is recorded, and a success's result is stored first, once
per job, in its own item (`#RESULT`): a second run never rewrites it, it completes the job with
the result stored. When the completion still fails after the client's retries (a transient
cause: DynamoDB throttling, a transaction cancelled by a race), the run gives the job up with its
outcome kept: its lease ends, a failure's reason and message stay on the job (a success's result
is in its item already), the outcome stays in this process too, and CompletionDeferredError
tells the worker to hand its work message back. Whoever comes next — the message again, a copy
of it, the sweep — lands the kept outcome without running the job again.

A refusal that no retry can cure (ValidationException: the item AWS would not store) ends the
job `failed` `internal_error` at once, with the refusal logged, instead of a redelivery loop.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Final

from botocore.exceptions import ClientError

from jobstream import observability
from jobstream.domain import JobRecord, JobStatus
from jobstream.errors import JobstreamError
from jobstream.jobtypes.runner import Outcome, fit_job_result
from jobstream.lifecycle import transitions
from jobstream.lifecycle.log import Settled, apply_until_settled
from jobstream.lifecycle.retention import item_expiry
from jobstream.protocol.errors import Reason, parse_reason
from jobstream.retries import transient
from jobstream.runtime import Runtime
from jobstream.store.ports import budgets, error_code

logger = logging.getLogger(__name__)

MAX_COMPLETE_ATTEMPTS: Final = 5
# Outcomes this process could not record, by (job, lease owner): a redelivery that lands here
# needs no second run even when keeping the outcome on the job failed too. Bounded.
_KEPT_IN_PROCESS: Final = 64
_REFUSED: Final = Outcome(reason=Reason.INTERNAL_ERROR, message="internal error")


class CompletionDeferredError(JobstreamError):
    """The job's outcome is known but could not be recorded yet: the work message must come back
    (a batch item failure), and whoever comes next lands the kept outcome. `released`: the run's
    lease has ended already (else it lapses on its own)."""

    def __init__(self, job_id: str, *, released: bool) -> None:
        super().__init__(job_id)
        self.released = released


@dataclass(frozen=True, slots=True)
class KeptOutcome:
    """A finished run's outcome still to be recorded, and the lease holder it is recorded as.
    `result_stored`: its result is in the job's result item already."""

    owner: str
    outcome: Outcome
    result_stored: bool = False


class _KeptOutcomes:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: OrderedDict[tuple[str, str], KeptOutcome] = OrderedDict()

    def put(self, job_id: str, kept: KeptOutcome) -> None:
        with self._lock:
            self._outcomes[(job_id, kept.owner)] = kept
            while len(self._outcomes) > _KEPT_IN_PROCESS:
                self._outcomes.popitem(last=False)

    def get(self, job_id: str, owner: str) -> KeptOutcome | None:
        with self._lock:
            return self._outcomes.get((job_id, owner))

    def forget(self, job_id: str, owner: str) -> None:
        with self._lock:
            self._outcomes.pop((job_id, owner), None)


kept_in_process = _KeptOutcomes()


def kept_outcome(rt: Runtime, record: JobRecord) -> KeptOutcome | None:
    """The outcome a run of this running job reached and could not record, if any: kept in this
    process by the run holding the lease; or, once that lease has ended (released by its run, or
    lapsed with a worker gone), the failure kept on the job or the result in its item."""
    owner = record.lease_owner
    if record.status is not JobStatus.RUNNING or not owner:
        return None
    in_process = kept_in_process.get(record.job_id, owner)
    if in_process is not None:
        return in_process
    if record.lease_active(rt.clock()):
        return None  # its run may still be going: only it may record its outcome
    if record.pending_reason is not None:
        return KeptOutcome(
            owner,
            Outcome(reason=parse_reason(record.pending_reason), message=record.pending_message),
        )
    result = rt.store.get_result(record)
    if result is None:
        return None
    return KeptOutcome(owner, Outcome(result=result), result_stored=True)


def land_kept_outcome(rt: Runtime, record: JobRecord) -> str | None:
    """Complete a running job with the outcome a run of it kept (as its lease holder); None when
    there is none (the job is run again, or goes to the liveness verdicts)."""
    kept = kept_outcome(rt, record)
    if kept is None:
        return None
    return complete(rt, record, kept.owner, kept.outcome, result_stored=kept.result_stored)


def within_budget(outcome: Outcome, job_type: str) -> Outcome:
    """The outcome as the store can hold it (`store/budgets.py`): a result cut by the job
    type's rule to `RESULT_BYTES`, or a failure when not even that fits; messages clipped."""
    if outcome.result is None:
        return Outcome(reason=outcome.reason, message=budgets.clip(outcome.message))
    result = fit_job_result(job_type, outcome.result, budgets.result_fits)
    if result is outcome.result:
        return outcome
    observability.count("results_cut")
    if result is None:
        logger.warning("a result too large to keep even cut fails its job")
        return Outcome(
            reason=Reason.INTERNAL_ERROR,
            message=f"the result is larger than the {budgets.RESULT_BYTES} bytes a job keeps",
        )
    logger.warning("a result larger than its budget was cut")
    return Outcome(result=result)


def complete(
    rt: Runtime, record: JobRecord, owner: str, outcome: Outcome, *, result_stored: bool = False
) -> str:
    """Store a success's result, then state and terminal event in one transaction, only while
    holding the lease. Returns the status, or "lost" when the job was cancelled, expired or
    taken over first; raises CompletionDeferredError when a transient cause outlasted the
    retries (the outcome is kept). A refusal no retry cures fails the job `internal_error`."""
    kept = KeptOutcome(owner, within_budget(outcome, record.job_type), result_stored)
    try:
        status = _attempt(rt, record, kept)
    except ClientError as error:
        # Not transient (_attempt deferred those): the same request would be refused again.
        logger.exception(
            "completion refused: the job fails internal_error",
            extra={"job_id": record.job_id, "aws_code": error_code(error)},
        )
        status = _attempt(rt, record, KeptOutcome(owner, _REFUSED))
    kept_in_process.forget(record.job_id, owner)
    return status


def _attempt(rt: Runtime, record: JobRecord, kept: KeptOutcome) -> str:
    """Store a success's result, then the transaction; or, when a transient cause outlasted
    the retries, the outcome kept (with what was stored) and the completion deferred."""
    try:
        if kept.outcome.result is not None and not kept.result_stored and _holds(record, kept):
            # The result first, in its own item: the completion then only moves the job, and
            # whoever reads it `succeeded` finds its result. Refused when a run of this job
            # stored one first (a run taken over, a worker that lost its lease): the job
            # succeeds with that one, never rewritten.
            rt.store.put_result(
                record, kept.outcome.result, expires_at=item_expiry(record, rt.settings)
            )
            kept = replace(kept, result_stored=True)
        return _transition(rt, record, kept.owner, kept.outcome)
    except Exception as error:
        failure = transient(error)
        if failure is None:
            raise
        released = _keep(rt, record.job_id, kept)
        observability.count("completions_deferred")
        logger.warning(
            "completion deferred: the outcome is kept and the work message will come back",
            extra={"job_id": record.job_id, "aws_code": failure.code},
        )
        raise CompletionDeferredError(record.job_id, released=released) from error


def _holds(record: JobRecord, kept: KeptOutcome) -> bool:
    """Whether the job, as this worker last read it, is running under its lease: a worker
    that knows it does not hold the job stores no result (its completion cannot land)."""
    return record.status is JobStatus.RUNNING and record.lease_owner == kept.owner


def _keep(rt: Runtime, job_id: str, kept: KeptOutcome) -> bool:
    """Keep the outcome in this process and give the job up, a failure's reason and message
    kept on it (a result not stored stays in this process only: another worker runs the job
    again): True when its lease ended now."""
    kept_in_process.put(job_id, kept)
    outcome = kept.outcome
    failed = outcome.result is None
    try:
        return rt.store.keep_outcome(
            job_id,
            kept.owner,
            now=rt.clock(),
            reason=_reason(outcome) if failed else None,
            message=outcome.message if failed else None,
        )
    except Exception:
        # The lease lapses on its own; this process's redelivery finds the outcome here.
        logger.warning(
            "could not keep the outcome on the job", extra={"job_id": job_id}, exc_info=True
        )
        return False


def _transition(rt: Runtime, record: JobRecord, owner: str, outcome: Outcome) -> str:
    failed = outcome.result is None
    reason, message = (_reason(outcome), outcome.message) if failed else (None, None)

    def decide(current: JobRecord) -> transitions.Transition | None:
        # The job as this worker knows it is tried as it is (the write's condition checks the
        # lease); read again after a lost race, only while this worker still holds it.
        if current is not record and not _holds_lease(current, owner):
            return None  # cancelled, expired or taken over: no later outcome
        return transitions.finish(current, owner, clock=rt.clock(), reason=reason, message=message)

    settled = apply_until_settled(
        rt,
        record,
        decide,
        reread=lambda job_id, _: rt.store.get_job_item(job_id),
        attempts=MAX_COMPLETE_ATTEMPTS,
    )
    if settled.moved:
        return _counted(settled.record.status)
    if _is_own_completion(settled):
        # Written by the try whose answer was lost; its retry found it done.
        return _counted(settled.record.status)
    return "lost"


def _holds_lease(record: JobRecord, owner: str) -> bool:
    return record.status is JobStatus.RUNNING and record.lease_owner == owner


def _reason(outcome: Outcome) -> str:
    # Stored as its word (the job item's `error_reason`).
    return (outcome.reason or Reason.INTERNAL_ERROR).value


def _is_own_completion(settled: Settled) -> bool:
    """Whether the last lost race hid this worker's own completion, written by a try whose
    answer was lost."""
    fresh, tried, stale = settled.record, settled.tried, settled.stale
    return (
        tried is not None
        and stale is not None
        and stale.after_lost_answer
        and fresh.status == tried.change.update.fields["status"]
        and fresh.updated_at == tried.at
        and tried.kind.value in fresh.recorded_kinds
    )


def _counted(status: JobStatus) -> str:
    if status is JobStatus.SUCCEEDED:
        observability.count("jobs_succeeded")
    else:
        observability.count("jobs_failed")  # failed, or expired at its deadline
    return status
