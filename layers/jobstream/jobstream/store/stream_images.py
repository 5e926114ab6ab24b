"""What a batch of the table's stream records (DynamoDB Streams, new images) names for the
dispatcher to hand off: new jobs, and callbacks nobody has tried or re-sent yet; and the commits
whose event it makes sure of: a job's first and its terminal (service/dispatcher.py says which
records those are, and why)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from jobstream.domain import TERMINAL_STATUSES, CallbackState, IntentRef, JobRecord
from jobstream.store import keys
from jobstream.store.records import item_to_record

_CHANGES: Final = frozenset({"INSERT", "MODIFY"})


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job as admission wrote it: its id and its tenant (whose message group it joins)."""

    job_id: str
    tenant: str


@dataclass(frozen=True, slots=True)
class NewCallback:
    """A callback nobody has sent yet, and its job's tenant (from its event's place in the
    tenant's feed; None for an event written before the feed): its message group. `kind`: its
    event's (None if the image lacks it)."""

    ref: IntentRef
    tenant: str | None
    kind: str | None = None


@dataclass
class NewItems:
    """What a batch of stream records names, each with its record's sequence number."""

    jobs: list[tuple[str, NewJob]] = field(default_factory=list)
    callbacks: list[tuple[str, NewCallback]] = field(default_factory=list)
    # Commits nothing else follows (a job's first, its terminal), each the job as its write
    # left it with its event's description (store/pending.py), whose event is not in the batch.
    commits: list[tuple[str, JobRecord]] = field(default_factory=list)


def new_items(records: Iterable[Mapping[str, Any]]) -> NewItems:
    found = NewItems()
    events: set[tuple[str, int]] = set()
    commits: list[tuple[str, Mapping[str, Any]]] = []
    for record in records:
        change = record.get("dynamodb") or {}
        image = change.get("NewImage") or {}
        pk = image.get(keys.PK, {}).get("S", "")
        if record.get("eventName") not in _CHANGES or not pk.startswith("JOB#"):
            continue
        sequence_number = str(change.get("SequenceNumber", ""))
        sk = image.get(keys.SK, {}).get("S", "")
        if sk == keys.JOB_SK:
            _job_image(found, commits, sequence_number, image)
        elif sk.startswith(keys.EVENT_PREFIX):
            events.add((keys.job_id_of(pk), keys.sequence_of(sk)))
            _event_image(found, sequence_number, image)
    for sequence_number, image in commits:
        job = item_to_record(image)
        if (job.job_id, job.event_count) not in events:
            found.commits.append((sequence_number, job))
    return found


def _job_image(
    found: NewItems,
    commits: list[tuple[str, Mapping[str, Any]]],
    sequence_number: str,
    image: Mapping[str, Any],
) -> None:
    admitted = _number(image, "event_count") == 1 and "dispatched_at" not in image
    if admitted:
        job_id = keys.job_id_of(image[keys.PK]["S"])
        found.jobs.append((sequence_number, NewJob(job_id, image.get("tenant", {}).get("S", ""))))
    if keys.PENDING_EVENT in image and (admitted or _ended(image)):
        commits.append((sequence_number, image))


def _event_image(found: NewItems, sequence_number: str, image: Mapping[str, Any]) -> None:
    if (
        image.get("state", {}).get("S") == CallbackState.PENDING
        and _number(image, "attempts") == 0
        and "resent_at" not in image
    ):
        pk, sk = image[keys.PK]["S"], image[keys.SK]["S"]
        ref = IntentRef(keys.job_id_of(pk), keys.sequence_of(sk))
        tenant = keys.tenant_of_feed_pk(image.get("feed_pk", {}).get("S", ""))
        kind = image.get("kind", {}).get("S")
        found.callbacks.append((sequence_number, NewCallback(ref, tenant, kind)))


def _ended(image: Mapping[str, Any]) -> bool:
    return image.get("status", {}).get("S") in TERMINAL_STATUSES


def _number(image: Mapping[str, Any], name: str) -> int | None:
    text = image.get(name, {}).get("N")
    return int(text) if text is not None and text.lstrip("-").isdigit() else None
