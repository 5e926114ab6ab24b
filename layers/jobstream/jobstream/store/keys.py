"""Key layout of the one table.

    job            PK=JOB#<job_id>  SK=#JOB
    event          PK=JOB#<job_id>  SK=EVT#<sequence:010>
    callback intent PK=JOB#<job_id> SK=CB#<sequence:010>   (the event it carries)

GSIs: `by_tenant` (tenant's jobs, newest first), `by_correlation` (sparse: jobs with a
correlation id), `sweep` (sparse: work a sweep must find, oldest first).
"""

from __future__ import annotations

from typing import Final

from jobstream.tenant_names import check_tenant_name

PK: Final = "pk"
SK: Final = "sk"
JOB_SK: Final = "#JOB"
EVENT_PREFIX: Final = "EVT#"
INTENT_PREFIX: Final = "CB#"
SEQUENCE_WIDTH: Final = 10
TIME_WIDTH: Final = 13

TENANT_INDEX: Final = "by_tenant"
CORRELATION_INDEX: Final = "by_correlation"
SWEEP_INDEX: Final = "sweep"
TTL_ATTRIBUTE: Final = "expires_at"

# Sweep index partitions. An open callback intent sits under CALLBACK_HANDOFF with the time the
# sweep should next look at it; a dead one under CALLBACK_DEAD; a job whose stream may still
# lack events (no terminal event yet) under ACTIVE_JOBS, oldest first.
CALLBACK_HANDOFF: Final = "CALLBACK#HANDOFF"
CALLBACK_DEAD: Final = "CALLBACK#DEAD"
ACTIVE_JOBS: Final = "JOB#ACTIVE"
# How long a callback may wait in the queue (or in flight) before the sweep sends it again.
HANDOFF_GRACE_MS: Final = 60_000


def job_pk(job_id: str) -> str:
    return f"JOB#{job_id}"


def event_sk(sequence: int) -> str:
    return f"{EVENT_PREFIX}{sequence:0{SEQUENCE_WIDTH}d}"


def intent_sk(sequence: int) -> str:
    return f"{INTENT_PREFIX}{sequence:0{SEQUENCE_WIDTH}d}"


def sequence_of(sort_key: str) -> int:
    return int(sort_key.split("#", 1)[1])


def tenant_pk(tenant: str) -> str:
    # A name with '#' could reach another tenant's correlation range: refused, never built.
    return f"T#{check_tenant_name(tenant)}"


def correlation_pk(tenant: str, correlation_id: str) -> str:
    return f"T#{check_tenant_name(tenant)}#C#{correlation_id}"


def created_sk(created_at: int, job_id: str) -> str:
    return f"{created_at:0{TIME_WIDTH}d}#{job_id}"


def sweep_sk(due_at: int, item_id: str) -> str:
    return f"{due_at:0{TIME_WIDTH}d}#{item_id}"


def sweep_due_bound(now: int) -> str:
    """The first sweep sort key that is not yet due at `now`."""
    return f"{now + 1:0{TIME_WIDTH}d}"


def intent_item_id(job_id: str, sequence: int) -> str:
    return f"{job_id}#{sequence}"
