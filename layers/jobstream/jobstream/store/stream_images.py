"""What a batch of the table's stream records (DynamoDB Streams, new images) names for the
dispatcher to hand off: new jobs, and callbacks nobody has tried or re-sent yet
(service/dispatcher.py says which records those are, and why)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from jobstream.domain import CallbackState, IntentRef
from jobstream.store import keys

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


def new_items(records: Iterable[Mapping[str, Any]]) -> NewItems:
    found = NewItems()
    for record in records:
        if record.get("eventName") not in _CHANGES:
            continue
        change = record.get("dynamodb") or {}
        image = change.get("NewImage") or {}
        sequence_number = str(change.get("SequenceNumber", ""))
        pk = image.get(keys.PK, {}).get("S", "")
        sk = image.get(keys.SK, {}).get("S", "")
        if not pk.startswith("JOB#"):
            continue
        job_id = keys.job_id_of(pk)
        if (
            sk == keys.JOB_SK
            and _number(image, "event_count") == 1
            and "dispatched_at" not in image
            # Admission writes no progress: a queued job that shows some waits for a slot
            # (`note_waiting`), and its release sends it again, not this record.
            and "progress_stage" not in image
        ):
            tenant = image.get("tenant", {}).get("S", "")
            found.jobs.append((sequence_number, NewJob(job_id, tenant)))
        elif (
            sk.startswith(keys.EVENT_PREFIX)
            and image.get("state", {}).get("S") == CallbackState.PENDING
            and _number(image, "attempts") == 0
            and "resent_at" not in image
        ):
            ref = IntentRef(job_id, keys.sequence_of(sk))
            tenant = keys.tenant_of_feed_pk(image.get("feed_pk", {}).get("S", ""))
            kind = image.get("kind", {}).get("S")
            found.callbacks.append((sequence_number, NewCallback(ref, tenant, kind)))
    return found


def _number(image: Mapping[str, Any], name: str) -> int | None:
    text = image.get(name, {}).get("N")
    return int(text) if text is not None and text.lstrip("-").isdigit() else None
