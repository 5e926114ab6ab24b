"""Choosing and running a job's executor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobstream.config.targets import TargetsFile
from jobstream.domain import JobRecord
from jobstream.jobtypes.candidate_search.executor import Outcome, fit_result, run
from jobstream.jobtypes.candidate_search.plan import build_plan
from jobstream.jobtypes.candidate_search.sources.base import Source
from jobstream.jobtypes.context import ExecutionContext

__all__ = ["Outcome", "fit_job_result", "run_job"]


def _source(kind: str, scan_delay_ms: int) -> Source:
    # Imported on demand: each source pulls in its own client code.
    if kind == "pixiv":
        from jobstream.jobtypes.candidate_search.sources.pixiv import (  # noqa: PLC0415
            PixivSource,
            refresh_token_from_environment,
        )

        return PixivSource(refresh_token_from_environment())
    from jobstream.jobtypes.candidate_search.sources.catalog import (  # noqa: PLC0415
        CatalogSource,
        catalog_path,
    )

    return CatalogSource(catalog_path(), scan_delay_ms=scan_delay_ms)


def run_job(targets_file: TargetsFile, record: JobRecord, context: ExecutionContext) -> Outcome:
    """Run a job of any known type; a target missing from configuration fails it."""
    targets = [target for target in targets_file.targets if target.id == record.target_id]
    if not targets:
        return Outcome(
            reason="configuration_error",
            message=f"target {record.target_id!r} is no longer configured",
        )
    target = targets[0]
    plan = build_plan(record.params, target)
    return run(plan, _source(target.source, target.scan_delay_ms), context)


def fit_job_result(
    result: dict[str, Any], fits: Callable[[dict[str, Any]], bool]
) -> dict[str, Any] | None:
    """The job type's rule for a result larger than the job item can hold: the result cut to
    what `fits`, or None when nothing useful fits (the job then fails)."""
    return fit_result(result, fits)
