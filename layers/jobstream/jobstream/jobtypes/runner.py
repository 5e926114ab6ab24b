"""Choosing and running a job's executor: the job type the registry names for the record."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from jobstream.config.targets import TargetsFile
from jobstream.domain import JobRecord
from jobstream.jobtypes import registry
from jobstream.jobtypes.base import JobRun, Outcome, ResultFits, keep_whole_result
from jobstream.jobtypes.context import ExecutionContext
from jobstream.protocol.errors import Reason

__all__ = ["Outcome", "fit_job_result", "run_job"]

logger = logging.getLogger(__name__)


def run_job(targets_file: TargetsFile, record: JobRecord, context: ExecutionContext) -> Outcome:
    """Run a job of any registered type; an unknown type or a target missing from configuration
    (for a type that runs on targets) fails it, and so does a result its type's model refuses."""
    job_type = registry.get(record.job_type)
    if job_type is None:
        return Outcome(
            reason=Reason.CONFIGURATION_ERROR,
            message=f"job type {record.job_type!r} is not served by this deployment",
        )
    target = None
    if job_type.uses_targets:
        targets = [target for target in targets_file.targets if target.id == record.target_id]
        if not targets:
            return Outcome(
                reason=Reason.CONFIGURATION_ERROR,
                message=f"target {record.target_id!r} is no longer configured",
            )
        target = targets[0]
    job = JobRun(
        job_id=record.job_id,
        tenant=record.tenant,
        params=record.params,
        target=target,
        context=context,
    )
    outcome = job_type.run(job)
    if outcome.result is not None:
        try:
            job_type.result_model().model_validate(outcome.result)
        except ValidationError:
            logger.exception("the %s executor produced an invalid result", job_type.name)
            return Outcome(reason=Reason.INTERNAL_ERROR, message="internal error")
    return outcome


def fit_job_result(
    job_type_name: str, result: dict[str, Any], fits: ResultFits
) -> dict[str, Any] | None:
    """The job type's rule for a result larger than the job item can hold: the result cut to
    what `fits`, or None when nothing useful fits (the job then fails)."""
    job_type = registry.get(job_type_name)
    rule = job_type.fit_result if job_type is not None else keep_whole_result
    return rule(result, fits)
