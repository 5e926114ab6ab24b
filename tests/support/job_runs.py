"""Running a job type's executor in a unit test: a recording execution context with the switches
the worker's own context has, and the `JobRun` an executor is given.

    context = RecordingContext()
    context.cancel(at_checkpoint=3)          # or lose_lease(...), pass_deadline(...)
    outcome = JOB_TYPE.run(job_run({"text": "a b c"}, context=context))
    assert context.stages == ["counting", "counting"]

A switch makes `checkpoint()` raise as the worker's does (service/execution.py): a cancel or a
lost lease raises JobInterruptedError, a passed deadline DeadlineReachedError (an
interruption too); the executor lets either propagate. `before_source_request()` is counted
(`source_requests`); its own switch, `stop_source_requests(...)`, makes it raise the same way
(the job stopped while it waited for its resource), and leaves the checkpoints alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobstream.jobtypes import (
    DeadlineReachedError,
    ExecutionContext,
    JobInterruptedError,
    JobRun,
    Target,
)


@dataclass
class RecordingContext:
    """An ExecutionContext that records every progress report and counts checkpoints and
    source requests."""

    progress_log: list[tuple[str, str | None]] = field(default_factory=list)
    checkpoints: int = 0
    source_requests: int = 0
    # The armed switch: the checkpoint (1-based) from which `checkpoint()` raises, and what.
    _stop_at: int | None = field(default=None, init=False, repr=False)
    _stop: JobInterruptedError | None = field(default=None, init=False, repr=False)
    # The gate's own switch: the source request (1-based) from which it raises, and what.
    _gate_stop_at: int | None = field(default=None, init=False, repr=False)
    _gate_stop: JobInterruptedError | None = field(default=None, init=False, repr=False)

    def progress(self, stage: str, message: str | None = None) -> None:
        self.progress_log.append((stage, message))

    def checkpoint(self) -> None:
        self.checkpoints += 1
        if (
            self._stop is not None
            and self._stop_at is not None
            and self.checkpoints >= self._stop_at
        ):
            raise self._stop

    def before_source_request(self) -> None:
        self.source_requests += 1
        if (
            self._gate_stop is not None
            and self._gate_stop_at is not None
            and self.source_requests >= self._gate_stop_at
        ):
            raise self._gate_stop

    def stop_source_requests(
        self, at_request: int | None = None, stop: JobInterruptedError | None = None
    ) -> None:
        """The gate raises from source request `at_request` (the next by default) on: `stop`,
        by default a lost lease's JobInterruptedError."""
        self._gate_stop = stop or JobInterruptedError("the job's lease was lost")
        self._gate_stop_at = at_request if at_request is not None else self.source_requests + 1

    @property
    def stages(self) -> list[str]:
        """The stages reported, in order."""
        return [stage for stage, _ in self.progress_log]

    def cancel(self, at_checkpoint: int | None = None) -> None:
        """The consumer cancels the job: `at_checkpoint` (the next by default) and every later
        checkpoint raise."""
        self._arm(JobInterruptedError("the job was cancelled"), at_checkpoint)

    def lose_lease(self, at_checkpoint: int | None = None) -> None:
        """Another worker took the job over (this one's lease was lost)."""
        self._arm(JobInterruptedError("the job's lease was lost"), at_checkpoint)

    def pass_deadline(self, at_checkpoint: int | None = None) -> None:
        """The job's deadline passes."""
        self._arm(DeadlineReachedError("the job passed its deadline"), at_checkpoint)

    def _arm(self, stop: JobInterruptedError, at_checkpoint: int | None) -> None:
        self._stop = stop
        self._stop_at = at_checkpoint if at_checkpoint is not None else self.checkpoints + 1


def job_run(
    params: dict[str, Any],
    *,
    target: Target | None = None,
    context: ExecutionContext | None = None,
    job_id: str = "job-1",
    tenant: str = "acme",
) -> JobRun:
    """The `JobRun` the worker would give an executor: a fresh RecordingContext unless one is
    given, and no target unless one is (a type that runs on targets is given one)."""
    return JobRun(
        job_id=job_id,
        tenant=tenant,
        params=params,
        target=target,
        context=context if context is not None else RecordingContext(),
    )
