"""A job record as the unit tests build one: the identity every job has, then their fields."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from jobstream.domain import JobRecord, JobStatus


def job_record(**fields: Any) -> JobRecord:
    """A queued job `job_x` of tenant acme created at 1,000 ms, with `fields` changed."""
    record = JobRecord(
        job_id="job_x",
        tenant="acme",
        job_type="candidate_search",
        idempotency_key="k",
        params={},
        params_canonical="{}",
        target_id="t",
        status=JobStatus.QUEUED,
        created_at=1_000,
        updated_at=1_000,
    )
    return replace(record, **fields)
