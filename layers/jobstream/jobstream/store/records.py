"""The items of one job and how a JobRecord maps onto them.

The job item (`#JOB`) holds the job's state. What only some reads need lives in items of its own,
so that the job item, rewritten on every state change, stays small:
the ack cursor (`#ACK`, written by acks alone) and a succeeded job's result (`#RESULT`, written
once). Both carry `job_created_at`, the creation time of the job they belong to: a job admitted
again under an expired key never reads an item of its predecessor as its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from typing import Any, Final

from jobstream.domain import JobRecord, JobStatus, StoredEvent
from jobstream.store import keys, listed, results
from jobstream.store.codec import from_attribute, from_item, to_item
from jobstream.store.results import from_result_attribute

_RECORD_FIELDS: Final = tuple(field.name for field in fields(JobRecord))
# Fields a JobRecord carries that the job item does not: `params` is `params_canonical` parsed,
# the cursor and the result have items of their own.
_NOT_ON_THE_JOB_ITEM: Final = frozenset({"params", "ack_sequence", "result"})
GENERATION: Final = "job_created_at"
# A progress event's item keeps what it reported (absent on every other event).
EVENT_PROGRESS: Final = ("progress_stage", "progress_message")


def record_to_item(record: JobRecord, *, previous_formats: bool = False) -> dict[str, Any]:
    """The job item of `record`; `previous_formats`: as the release before reads it (its labels
    under `labels`, store/listed.py, and its correlation id's entry on it)."""
    values: dict[str, Any] = {
        keys.PK: keys.job_pk(record.job_id),
        keys.SK: keys.JOB_SK,
        "gsi1pk": keys.job_tenant_pk(record.tenant, record.job_id),
        "gsi1sk": keys.created_sk(record.created_at, record.job_id),
    }
    if record.correlation_id and previous_formats:
        # The release before lists a correlation id's jobs by their job items' entries in
        # `by_correlation`, rewritten with each change of status; this release lists a job
        # under its first event's item, which no later write rewrites (`correlation_entry`).
        values["gsi2pk"] = keys.correlation_pk(record.tenant, record.correlation_id)
        values["gsi2sk"] = values["gsi1sk"]
    if not record.is_terminal:
        # The sweep visits the job until its stream is complete (store/jobs.py `leave_active`).
        values["sweep_pk"] = keys.job_sweep_pk(keys.SweepBacklog.ACTIVE_JOBS, record.job_id)
        values["sweep_sk"] = keys.sweep_sk(record.created_at, record.job_id)
    for name in _RECORD_FIELDS:
        if name in _NOT_ON_THE_JOB_ITEM or name == "labels":  # labels: below
            continue
        value = getattr(record, name)
        # Absent attributes read back as the record's defaults; empty sets cannot be stored; a
        # false flag is its default (a job without quotas stores no byte more).
        if value is None or value is False or (isinstance(value, frozenset | dict) and not value):
            continue
        values[name] = value
    if record.labels:
        # Labels the listing index may hold under `labels`, which it projects; larger ones
        # under a name of their own (store/listed.py).
        text = listed.labels_text(record.labels)
        values[listed.labels_attribute(text, previous_formats)] = text
    shown = listed.shown(record)
    if shown is not None:
        values[listed.ATTRIBUTE] = shown
    return to_item(values)


def correlation_entry(record: JobRecord, sequence: int) -> dict[str, str]:
    """The keys that list a job under its correlation id, carried by its first event's item
    (none on any other item, nor for a job without one): an entry of `tenant_jobs` under the
    correlation id's own partition key, which no tenant's listing reads. The event's item is
    written once and its later writes (its callback's) change nothing the index holds, so the
    entry is written once, where the job item's would be rewritten at its start and its end."""
    if sequence != 1 or not record.correlation_id:
        return {}
    return {
        "gsi1pk": keys.correlation_pk(record.tenant, record.correlation_id),
        "gsi1sk": keys.created_sk(record.created_at, record.job_id),
    }


def item_to_record(item: Mapping[str, Any]) -> JobRecord:
    values = from_item(item)
    labels = values.pop(listed.UNLISTED_LABELS, None) or values.get("labels")
    if isinstance(labels, str):
        values["labels"] = json.loads(labels)
    # The params are kept once, as their canonical text (the replay comparison's form), which
    # is their JSON: the same values.
    values["params"] = json.loads(values["params_canonical"])
    return JobRecord(
        **{
            name: values[name]
            for name in _RECORD_FIELDS
            if name in values and name not in {"ack_sequence", "result"}
        }
    )


def with_parts(record: JobRecord, items: Iterable[Mapping[str, Any]]) -> JobRecord:
    """The job with its ack cursor and result, from the `#ACK` and `#RESULT` items read with it
    (an item of an earlier job under the same key is not this job's; a result is the job's
    only once it has succeeded: a run whose completion lost left it for nothing)."""
    for item in items:
        sort_key = item[keys.SK]["S"]
        if not is_part_of(record, item):
            continue
        if sort_key == keys.ACK_SK:
            record = replace(record, ack_sequence=int(from_attribute(item["ack_sequence"])))
        elif sort_key == keys.RESULT_SK and record.status is JobStatus.SUCCEEDED:
            record = replace(record, result=from_result_attribute(item[results.ATTRIBUTE]))
    return record


def is_part_of(record: JobRecord, item: Mapping[str, Any]) -> bool:
    """Whether a part item (`#ACK`, `#RESULT`) belongs to this job, not to an earlier job
    under the same key."""
    return GENERATION in item and from_attribute(item[GENERATION]) == record.created_at


def event_progress(event: StoredEvent) -> dict[str, str]:
    """The progress attributes of an event's item: what a progress event reported."""
    values = {name: getattr(event, name) for name in EVENT_PROGRESS}
    return {name: value for name, value in values.items() if value is not None}


def job_key(job_id: str) -> dict[str, Any]:
    return to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.JOB_SK})


def part_key(job_id: str, sort_key: str) -> dict[str, Any]:
    return to_item({keys.PK: keys.job_pk(job_id), keys.SK: sort_key})
