"""What the tenant listing index shows of a job, so that a page is read from the index alone.

The index (`tenant_jobs`) projects what a Job document shows and what never changes while a job
runs: its type, idempotency key, times of creation, deadline and start, correlation id, labels,
status and reason. What does change while it runs (the heartbeat, the progress, the attempt,
`updated_at`) would rewrite the job's entry on every heartbeat; a job that is not running keeps
those values in one small map of its own instead, `listed`, which the index projects:

- written by every write that leaves the job queued or finished (its admission, a wait for a
  resource's slot, its terminal commit), with the values the write leaves on the job item: a
  commit holds only while the ones it does not set are still as it read them (after a heartbeat
  or a take-over that landed since, it fails: its caller reads the job again and decides anew,
  or leaves it to the sweep's next pass), so the entry and the item never disagree and nothing
  is set back; the map names the status it was written for, and one found under another status
  (left by a writer that moves the status without it: the release before, while both run) is
  not trusted;
- removed when the job starts running, so a heartbeat or a progress report writes the job item
  alone, and a running job's entry sends the listing to the table.

A succeeded job's result (`#RESULT`) has an entry of its own when its item is small
(`LISTED_RESULT_MAX_BYTES`), just after its job's in the listing's order, so a page of finished
jobs reads no item of the table. Larger results are read from the table: one read unit per 4 KB
item costs what the index's entry would, and their entries would cost writes.

A job written before the index held these (no `listed` on its entry) is read from the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from jobstream.domain import JobRecord, JobStatus, JobView
from jobstream.store import keys
from jobstream.store.codec import from_item

if TYPE_CHECKING:
    from jobstream.store.ports import StateChange


@dataclass
class UpdateParts:
    """An UpdateExpression being built: its placeholders, SET assignments and conditions."""

    names: dict[str, str]
    values: dict[str, Any]
    assignments: list[str]
    conditions: list[str]


ATTRIBUTE: Final = "listed"
# Labels are the consumer's own, up to the body's size: larger than this (their JSON text),
# they are kept off the index, under a name it does not project, and such a job is read from
# the table; an entry stays a few KB at most, whatever a Task carries (but in the first step
# of an upgrade, which keeps labels where the release before reads them: docs/operations.md).
LISTED_LABELS_MAX_BYTES: Final = 1024
UNLISTED_LABELS: Final = "labels_unlisted"
# A result whose listing entry (its keys and the result) is at most this large gets one: one
# write unit.
LISTED_RESULT_MAX_BYTES: Final = 1024
# The result entry's sort key: its job's, and this suffix (just after it, newest first).
RESULT_SUFFIX: Final = "#R"
# The job item's attributes the map stands for: a commit that leaves the job queued or
# finished writes the map with the values it sets, and holds only while the others are as read.
# What an absent attribute reads back as (store/records.py).
_DEFAULTS: Final[Mapping[str, Any]] = {"attempt": 0}
_SHOWN_WHILE_RUNNING: Final = (
    "updated_at",
    "heartbeat_at",
    "attempt",
    "progress_stage",
    "progress_message",
)


def shown(record: JobRecord) -> dict[str, Any] | None:
    """The `listed` map of a job that is not running; None for a running job."""
    if record.status is JobStatus.RUNNING:
        return None
    # The status it was written for: a write that moves the status without it (a release
    # before this one's, running meanwhile) leaves a map the listing does not trust.
    values: dict[str, Any] = {"t": record.status.value, "u": record.updated_at}
    if record.heartbeat_at is not None:
        values["h"] = record.heartbeat_at
    if record.attempt:
        values["a"] = record.attempt
    # A queued job's stage says whether it waits for a slot; a finished job's is its status.
    if record.status is JobStatus.QUEUED and record.progress_stage is not None:
        values["s"] = record.progress_stage
    if record.progress_message is not None:
        values["m"] = record.progress_message
    if record.labels and labels_attribute(labels_text(record.labels)) != "labels":
        # Too large for the index: the listing reads the job from the table, wherever a writer
        # (this release's or one writing the previous formats) keeps them.
        values["o"] = True
    return values


def labels_text(labels: Mapping[str, str]) -> str:
    """Labels as the job item keeps them. They are the consumer's own object: any key, ""
    included. DynamoDB refuses an empty map key, so they are kept as one JSON string, which
    holds every object exactly."""
    return json.dumps(labels, ensure_ascii=False, separators=(",", ":"))


def labels_attribute(text: str, previous_formats: bool = False) -> str:
    """The job item's attribute for labels kept as `text`: `labels`, which the index
    projects, unless they are too large for it (and the release before need not read them)."""
    if previous_formats or len(text.encode("utf-8")) <= LISTED_LABELS_MAX_BYTES:
        return "labels"
    return UNLISTED_LABELS


def commit_clause(
    record: JobRecord,
    change: StateChange,
    expression: UpdateParts,
) -> list[str]:
    """A commit's part in the job's `listed` map (`record`: the job as the committer read
    it); returns the attributes it removes. Starting to run removes the map; a change that
    leaves the job queued or finished writes it, on condition that the job's attributes it
    stands for and the change does not set are still as read (after a heartbeat, a take-over or
    a progress report that landed since, the commit fails: StaleJobError)."""
    after = change.update.applied_to(record)
    if after.status is JobStatus.RUNNING:
        return [ATTRIBUTE] if record.status is not JobStatus.RUNNING else []
    expression.names["#listed"] = ATTRIBUTE
    expression.values[":listed"] = shown(after)
    expression.assignments.append("#listed = :listed")
    changed = set(change.update.fields)
    for index, name in enumerate(_SHOWN_WHILE_RUNNING):
        if name in changed:
            continue
        value = getattr(record, name)
        placeholder = f"#l{index}"
        expression.names[placeholder] = name
        # The map shows the value read: the commit holds only while the job still has it.
        if value is None:
            expression.conditions.append(f"attribute_not_exists({placeholder})")
        elif value == _DEFAULTS.get(name):
            expression.values[f":l{index}"] = value
            expression.conditions.append(
                f"(attribute_not_exists({placeholder}) OR {placeholder} = :l{index})"
            )
        else:
            expression.values[f":l{index}"] = value
            expression.conditions.append(f"{placeholder} = :l{index}")
    return []


def view(entry: Mapping[str, Any]) -> JobView | None:
    """The job an index entry shows, without its result; None when the entry cannot show it
    (a running job, or one written before the index held `listed`)."""
    if ATTRIBUTE not in entry:
        return None
    values = from_item(entry)
    listed: Mapping[str, Any] = values[ATTRIBUTE]
    if listed.get("t") != values["status"] or listed.get("o"):
        # Written for another status (a run's start removes the map: a writer that does not
        # know it left it), or the job's labels are too large for the index.
        return None
    labels = values.get("labels")
    return JobView(
        job_id=keys.job_id_of(values[keys.PK]),
        job_type=values["job_type"],
        idempotency_key=values["idempotency_key"],
        status=JobStatus(values["status"]),
        created_at=int(values["created_at"]),
        updated_at=int(listed["u"]),
        deadline_at=_number(values.get("deadline_at")),
        correlation_id=values.get("correlation_id"),
        labels=json.loads(labels) if isinstance(labels, str) else None,
        started_at=_number(values.get("started_at")),
        heartbeat_at=_number(listed.get("h")),
        attempt=int(listed.get("a", 0)),
        progress_stage=listed.get("s"),
        progress_message=listed.get("m"),
        reason=values.get("reason"),
        reason_message=values.get("reason_message"),
    )


def is_result_entry(entry: Mapping[str, Any]) -> bool:
    return bool(entry[keys.SK]["S"] == keys.RESULT_SK)


def result_listing_keys(record: JobRecord) -> dict[str, str]:
    """The listing keys of the job's result item: its job's partition, just after its job."""
    return {
        "gsi1pk": keys.job_tenant_pk(record.tenant, record.job_id),
        "gsi1sk": keys.created_sk(record.created_at, record.job_id) + RESULT_SUFFIX,
    }


def _number(value: Any) -> int | None:
    return int(value) if value is not None else None
