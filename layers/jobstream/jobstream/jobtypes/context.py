"""What an executor may do while it runs: report progress, stop when told to, and wait for its
source's leave before each request."""

from __future__ import annotations

from typing import Protocol

from jobstream.errors import JobstreamError


class JobInterruptedError(JobstreamError):
    """Raised by `checkpoint()` when the job was cancelled or its lease was lost: stop now."""


class DeadlineReachedError(JobInterruptedError):
    """Raised by `checkpoint()` when the job passed its deadline: stop, it has expired."""


class ExecutionContext(Protocol):
    def progress(self, stage: str, message: str | None = None) -> None:
        """Report what the executor is doing (rate-limited into `job.progress` events)."""

    def checkpoint(self) -> None:
        """Raise JobInterruptedError if the job must stop; call it between units of work."""

    def before_source_request(self) -> None:
        """Called before every request to the job's source: blocks until the target's resource
        allows one more (its per-minute pace, its back-off); raises JobInterruptedError /
        DeadlineReachedError like checkpoint()."""
