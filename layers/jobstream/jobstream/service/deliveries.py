"""A consumer's view of its own callbacks (an extension of v1): how each was delivered."""

from __future__ import annotations

from typing import Any

from jobstream.protocol.deliveries import job_deliveries
from jobstream.runtime import Runtime
from jobstream.service.ownership import load_owned_job


def job_callbacks(rt: Runtime, tenant: str, job_id: str) -> dict[str, Any]:
    """Every callback of the tenant's job, with its delivery state (404 for another's job)."""
    record = load_owned_job(rt, tenant, job_id)
    callbacks = rt.callbacks.of_job(job_id, since=record.created_at) if record.callback_url else []
    return job_deliveries(record, callbacks, rt.clock())
