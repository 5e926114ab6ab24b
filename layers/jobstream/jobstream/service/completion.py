"""Completing a job: its outcome and terminal event in one transaction, never thrown away.

A run's outcome is known before it is recorded. When the completion still fails after the
client's retries (a transient cause: DynamoDB throttling, a transaction cancelled by a race),
the outcome is kept, on the job item (`pending_outcome`, one small conditional write) and in this
process, and CompletionDeferredError tells the worker to leave its work message on the queue.
The message's redelivery resumes the same claimed job and lands the kept outcome without running
the executor again; if no redelivery manages it, the sweep lands it once the lease has lapsed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from typing import Final

from jobstream import observability
from jobstream.domain import JobChange, JobRecord, JobStatus
from jobstream.jobtypes.runner import Outcome, fit_job_result
from jobstream.protocol.documents import terminal_status_for
from jobstream.protocol.errors import Reason
from jobstream.protocol.events import EventKind
from jobstream.retries import transient
from jobstream.service.retention import item_expiry
from jobstream.service.runtime import Runtime
from jobstream.service.stream import record_transition
from jobstream.store import budgets
from jobstream.store.jobs import StaleJobError, StateChange

logger = logging.getLogger("jobstream.execution")

MAX_COMPLETE_ATTEMPTS: Final = 5
# Outcomes this process could not record, by (job, lease owner): a redelivery that lands here
# needs no second run even when keeping the outcome on the job failed too. Bounded.
_KEPT_IN_PROCESS: Final = 64


class CompletionDeferredError(Exception):
    """The job's outcome is known but could not be recorded yet: the work message must come back
    (a batch item failure), and its redelivery lands the kept outcome."""


class _KeptOutcomes:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcomes: OrderedDict[tuple[str, str], Outcome] = OrderedDict()

    def put(self, job_id: str, owner: str, outcome: Outcome) -> None:
        with self._lock:
            self._outcomes[(job_id, owner)] = outcome
            while len(self._outcomes) > _KEPT_IN_PROCESS:
                self._outcomes.popitem(last=False)

    def get(self, job_id: str, owner: str) -> Outcome | None:
        with self._lock:
            return self._outcomes.get((job_id, owner))

    def forget(self, job_id: str, owner: str) -> None:
        with self._lock:
            self._outcomes.pop((job_id, owner), None)


_kept = _KeptOutcomes()


def encode_outcome(outcome: Outcome) -> str:
    value = {"result": outcome.result, "reason": outcome.reason, "message": outcome.message}
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decode_outcome(text: str) -> Outcome:
    value = json.loads(text)
    return Outcome(
        result=value.get("result"), reason=value.get("reason"), message=value.get("message")
    )


def known_outcome(record: JobRecord, owner: str) -> Outcome | None:
    """The outcome an earlier run of this claim reached and could not record, if any."""
    if record.pending_outcome is not None:
        return decode_outcome(record.pending_outcome)
    return _kept.get(record.job_id, owner)


def within_budget(outcome: Outcome, job_type: str) -> Outcome:
    """The outcome as the job item can hold it (`store/budgets.py`): a result cut by the job
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
            reason=Reason.INTERNAL_ERROR.value,
            message=f"the result is larger than the {budgets.RESULT_BYTES} bytes a job keeps",
        )
    logger.warning("a result larger than its budget was cut")
    return Outcome(result=result)


def complete(rt: Runtime, record: JobRecord, owner: str, outcome: Outcome) -> str:
    """State and terminal event in one transaction, only while holding the lease. Returns the
    status, or "lost" when the job was cancelled, expired or taken over first; raises
    CompletionDeferredError when a transient cause outlasted the retries (the outcome is kept)."""
    outcome = within_budget(outcome, record.job_type)
    try:
        status = _record(rt, record, owner, outcome)
    except Exception as error:
        failure = transient(error)
        if failure is None:
            raise
        _keep(rt, record.job_id, owner, outcome)
        observability.count("completions_deferred")
        logger.warning(
            "completion deferred: the outcome is kept and the work message will come back",
            extra={"job_id": record.job_id, "aws_code": failure.code},
        )
        raise CompletionDeferredError(record.job_id) from error
    _kept.forget(record.job_id, owner)
    return status


def land_kept_outcome(rt: Runtime, record: JobRecord) -> str | None:
    """The sweep's repair: complete a running job whose lease lapsed with the outcome its run
    kept; None when there is none (the job goes to the liveness verdicts instead)."""
    if (
        record.status is not JobStatus.RUNNING
        or record.pending_outcome is None
        or not record.lease_owner
    ):
        return None
    return complete(rt, record, record.lease_owner, decode_outcome(record.pending_outcome))


def _keep(rt: Runtime, job_id: str, owner: str, outcome: Outcome) -> None:
    _kept.put(job_id, owner, outcome)
    try:
        rt.store.keep_outcome(job_id, owner, encode_outcome(outcome))
    except Exception as error:
        if transient(error) is None:
            raise
        # The redelivery still finds it in this process, or runs the job again.
        logger.warning("could not keep the outcome on the job", extra={"job_id": job_id})


def _record(rt: Runtime, record: JobRecord, owner: str, outcome: Outcome) -> str:
    if (
        outcome.result is not None
        and record.status is JobStatus.RUNNING
        and record.lease_owner == owner
    ):
        # The result first, in its own item: the completion below then only moves the job, and
        # whoever reads it `succeeded` finds its result (store/jobs.py: put_result). Not for a
        # job this worker does not hold, as far as it knows: its completion cannot land.
        rt.store.put_result(record, outcome.result, expires_at=item_expiry(record, rt.settings))
    for _ in range(MAX_COMPLETE_ATTEMPTS):
        now = max(rt.clock(), record.updated_at)
        status, kind, ending = _ending(outcome)
        change = StateChange(
            JobChange(
                {
                    **ending,
                    "updated_at": now,
                    "lease_owner": None,
                    "lease_expires_at": None,
                    "pending_outcome": None,
                }
            ),
            require_status=frozenset({JobStatus.RUNNING}),
            require_lease_owner=owner,
        )
        try:
            record_transition(rt, record, kind=kind, change=change)
        except StaleJobError as stale:
            fresh = rt.store.get_job_item(record.job_id)
            if stale.after_lost_answer and _is_own_completion(fresh, status, kind, now):
                # Written by the try whose answer was lost; its retry found it done.
                return _counted(status)
            if fresh is None or fresh.status is not JobStatus.RUNNING or fresh.lease_owner != owner:
                return "lost"  # cancelled, expired or taken over: no later outcome
            record = fresh
            continue
        return _counted(status)
    return "lost"


def _ending(outcome: Outcome) -> tuple[JobStatus, EventKind, dict[str, object]]:
    """The terminal status an outcome gives, its event and the fields it sets (the result
    has its own item, written before)."""
    if outcome.result is not None:
        return JobStatus.SUCCEEDED, EventKind.OUTCOME_SUCCEEDED, {"status": JobStatus.SUCCEEDED}
    reason = outcome.reason or Reason.INTERNAL_ERROR.value
    status = terminal_status_for(reason)
    kind = EventKind.OUTCOME_EXPIRED if status is JobStatus.EXPIRED else EventKind.OUTCOME_FAILED
    return status, kind, {"status": status, "reason": reason, "reason_message": outcome.message}


def _is_own_completion(
    fresh: JobRecord | None, status: JobStatus, kind: EventKind, at: int
) -> bool:
    return (
        fresh is not None
        and fresh.status == status
        and fresh.updated_at == at
        and kind.value in fresh.recorded_kinds
    )


def _counted(status: JobStatus) -> str:
    if status is JobStatus.SUCCEEDED:
        observability.count("jobs_succeeded")
    else:
        observability.count("jobs_failed")  # failed, or expired at its deadline
    return status
