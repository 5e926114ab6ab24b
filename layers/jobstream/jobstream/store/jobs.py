"""Jobs, their event streams and callback intents in the one table."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.domain import CALLBACK_PENDING, TERMINAL_STATUSES, JobRecord, StoredEvent
from jobstream.retries import after_lost_answer, default_policy
from jobstream.store import keys
from jobstream.store.client import dynamodb_client, error_code
from jobstream.store.codec import from_attribute, from_item, to_attribute, to_item
from jobstream.store.shards import MergedQuery
from jobstream.store.sweep_index import sweep_entries

MAX_CALLBACK_ATTEMPTS: Final = 8
_RECORD_FIELDS: Final = tuple(field.name for field in fields(JobRecord))
_LAST_SEQUENCE: Final = 10**keys.SEQUENCE_WIDTH - 1


# BatchGetItem may leave keys unprocessed under throttling: ask again this many times.
_BATCH_READ_ATTEMPTS: Final = 3


class InvalidCursorError(ValueError):
    """A listing cursor that this listing did not issue."""


class StaleJobError(Exception):
    """A conditional write lost: the job changed since it was read. Re-read and decide again.

    `after_lost_answer`: the refusal answered a retry whose earlier try may have been applied,
    so the change found may be this write itself.
    """

    def __init__(self, job_id: str, *, after_lost_answer: bool = False) -> None:
        super().__init__(job_id)
        self.after_lost_answer = after_lost_answer


@dataclass(frozen=True, slots=True)
class CallbackIntent:
    """A callback to send for one event; recorded in the event's own transaction. It names the
    event and holds no copy of it: the body is rebuilt from the job when it is sent, so an
    intent stays small whatever the job's labels and result weigh (`store/budgets.py`)."""

    url: str
    event_id: str
    # The origin of the request that recorded the event: the body's `events_url` is built on it.
    base_url: str | None = None


@dataclass(frozen=True, slots=True)
class StateChange:
    """Job attributes to change together with an event, and the conditions guarding the move:
    the states it may leave, the lease holder it requires, or a lease that must have expired."""

    values: Mapping[str, Any]
    remove: tuple[str, ...] = ()
    require_status: frozenset[str] | None = None
    require_lease_owner: str | None = None
    require_lease_expired_at: int | None = None


@dataclass(frozen=True, slots=True)
class ListedJob:
    """A job of a listing, and the start key that resumes the listing just after it."""

    record: JobRecord
    resume_key: dict[str, Any]


@dataclass(frozen=True, slots=True)
class JobQuery:
    tenant: str
    correlation_id: str | None = None
    status: str | None = None
    limit: int = 100
    start_key: dict[str, Any] | None = None


def record_to_item(record: JobRecord) -> dict[str, Any]:
    values: dict[str, Any] = {
        keys.PK: keys.job_pk(record.job_id),
        keys.SK: keys.JOB_SK,
        "gsi1pk": keys.job_tenant_pk(record.tenant, record.job_id),
        "gsi1sk": keys.created_sk(record.created_at, record.job_id),
    }
    if record.correlation_id:
        values["gsi2pk"] = keys.correlation_pk(record.tenant, record.correlation_id)
        values["gsi2sk"] = values["gsi1sk"]
    if record.status not in TERMINAL_STATUSES:
        # The sweep visits the job until it finishes (with its terminal event, in one write).
        values["sweep_pk"] = keys.job_sweep_pk(keys.ACTIVE_JOBS, record.job_id)
        values["sweep_sk"] = keys.sweep_sk(record.created_at, record.job_id)
    for name in _RECORD_FIELDS:
        value = getattr(record, name)
        # Absent attributes read back as the record's defaults; empty sets cannot be stored.
        if value is None or (
            isinstance(value, frozenset | dict) and not value and name != "params"
        ):
            continue
        values[name] = value
    if record.labels:
        values["labels"] = _labels_text(record.labels)
    return to_item(values)


def item_to_record(item: Mapping[str, Any]) -> JobRecord:
    values = from_item(item)
    if isinstance(values.get("labels"), str):
        values["labels"] = json.loads(values["labels"])
    return JobRecord(**{name: values[name] for name in _RECORD_FIELDS if name in values})


def _labels_text(labels: Mapping[str, str]) -> str:
    # Labels are the consumer's own object: any key, "" included. DynamoDB refuses an empty map
    # key, so they are kept as one JSON string, which holds every object exactly.
    return json.dumps(labels, ensure_ascii=False, separators=(",", ":"))


class JobStore:
    def __init__(
        self, table_name: str, client_factory: Callable[[], Any] = dynamodb_client
    ) -> None:
        self.table_name = table_name
        self.client_factory = client_factory

    @property
    def client(self) -> Any:
        return self.client_factory()

    # -- reads -------------------------------------------------------------------------------

    def get_job(self, job_id: str) -> JobRecord | None:
        response = self.client.get_item(
            TableName=self.table_name,
            Key=_job_key(job_id),
            ConsistentRead=True,
            ReturnConsumedCapacity="TOTAL",
        )
        item = response.get("Item")
        return item_to_record(item) if item else None

    def events_after(
        self, job_id: str, after_sequence: int, limit: int
    ) -> tuple[list[StoredEvent], bool]:
        """Up to `limit` events strictly after a position, and whether more follow.

        A key-range query: its cost depends on the page, never on how many events precede it.
        """
        items = self._job_range(
            job_id, keys.event_sk(after_sequence + 1), keys.event_sk(_LAST_SEQUENCE), limit + 1
        )
        events = [_item_to_event(job_id, item) for item in items]
        return events[:limit], len(events) > limit

    def iter_jobs(self, query: JobQuery) -> Iterator[ListedJob]:
        """A tenant's jobs, newest first, each with the start key that resumes the listing just
        after it. Read lazily: a caller that stops early, as a page bounded by bytes does, has
        read little more than it used.

        A tenant's jobs are spread over TENANT_SHARDS partitions: one query per shard, merged
        newest first. The resume key holds the sort key of the job, which orders jobs across
        every shard, so the next page starts below it in each (docs/capacity.md).
        """
        if query.correlation_id:
            index, pk_name, sort_name = keys.CORRELATION_INDEX, "gsi2pk", "gsi2sk"
            partitions = [keys.correlation_pk(query.tenant, query.correlation_id)]
        else:
            index, pk_name, sort_name = keys.TENANT_INDEX, "gsi1pk", "gsi1sk"
            partitions = keys.tenant_partitions(query.tenant)
        condition = "#p = :p"
        names = {"#p": pk_name}
        values: dict[str, Any] = {}
        if query.start_key:
            if set(query.start_key) != {keys.PK, keys.SK, sort_name}:
                raise InvalidCursorError("cursor does not belong to this listing")
            condition += " AND #s < :after"
            names["#s"] = sort_name
            values[":after"] = to_attribute(query.start_key[sort_name])
        base: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": index,
            "KeyConditionExpression": condition,
            "ScanIndexForward": False,
            # Each shard holds about 1/n of the page: read that much (and one more) at a time.
            "Limit": min(query.limit + 1, -(-query.limit // len(partitions)) + 1),
            "ReturnConsumedCapacity": "TOTAL",
        }
        if query.status:
            base["FilterExpression"] = "#status = :status"
            names["#status"] = "status"
            values[":status"] = to_attribute(query.status)
        merged = MergedQuery(
            self.client,
            [
                {
                    **base,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": {**values, ":p": to_attribute(partition)},
                }
                for partition in partitions
            ],
            sort_key=sort_name,
            descending=True,
        )
        return _listed(iter(merged), (keys.PK, keys.SK, sort_name))

    # -- writes ------------------------------------------------------------------------------

    def create_job(
        self, record: JobRecord, accepted: StoredEvent, intent: CallbackIntent | None
    ) -> bool:
        """Admission: the job, its first event and its callback intent in one transaction.

        False when a job with this id already exists (nothing was written).
        """
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": record_to_item(record),
                    # One idempotency key, one job: never overwrite an admitted job.
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": keys.PK},
                }
            },
            self._put_event(accepted),
        ]
        if intent is not None:
            items.append(self._put_intent(record, accepted, intent))
        try:
            self.client.transact_write_items(TransactItems=items, ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    def append_event(
        self,
        record: JobRecord,
        event: StoredEvent,
        *,
        change: StateChange | None = None,
        intent: CallbackIntent | None = None,
        expires_at: int | None = None,
        once_per_job: bool = False,
    ) -> None:
        """Record `event` as the job's next event, with an optional state change, atomically.
        The caller says what the event is (the store knows no event kinds): `once_per_job`, its
        kind may stand once in the job's stream; `expires_at`, it is the terminal event.

        A terminal event needs `expires_at` (epoch seconds): the job and the event carry it from
        this write on, its callback intent keeps it as `retain_until` (it expires once it is
        closed), and the event waits in the RETIRING backlog until the job's earlier items are
        stamped too (service/retention.py).

        Raises StaleJobError when the job moved on since `record` was read (another writer won).
        """
        if event.sequence != record.event_count + 1:
            raise ValueError("an event must take the next sequence of its job")
        names: dict[str, str] = {"#count": "event_count", "#last": "last_event_at"}
        values: dict[str, Any] = {
            ":expected": record.event_count,
            ":next": event.sequence,
            ":at": event.at,
        }
        assignments = ["#count = :next", "#last = :at"]
        # The sequence check makes concurrent appenders serialise: exactly one wins each slot.
        conditions = ["#count = :expected"]
        add_clause = (
            _once_per_job_clause(event.kind, names, values, conditions) if once_per_job else ""
        )
        removed: list[str] = []
        if expires_at is not None:
            removed += _terminal_clause(expires_at, names, values, assignments)
        if change is not None:
            removed += _apply_change(change, names, values, assignments, conditions)
        for index, name in enumerate(removed):
            names[f"#r{index}"] = name
        remove_clause = (
            " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removed))) if removed else ""
        )
        update = {
            "Update": {
                "TableName": self.table_name,
                "Key": _job_key(record.job_id),
                "UpdateExpression": "SET " + ", ".join(assignments) + remove_clause + add_clause,
                "ConditionExpression": " AND ".join(conditions),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": to_item(values),
            }
        }
        items = [update, self._put_event(event, expires_at=expires_at)]
        if intent is not None:
            items.append(self._put_intent(record, event, intent, retain_until=expires_at))
        try:
            self.client.transact_write_items(TransactItems=items, ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if _condition_failed(error):
                raise StaleJobError(
                    record.job_id, after_lost_answer=after_lost_answer(error)
                ) from None
            raise

    def renew_lease(self, job_id: str, owner: str, *, now: int, lease_ms: int) -> bool:
        """Heartbeat: extend the lease; False when the job is no longer ours to run."""
        return self._update_held_job(
            job_id,
            owner,
            "SET lease_expires_at = :until, heartbeat_at = :now",
            {":until": now + lease_ms, ":now": now},
        )

    def keep_outcome(self, job_id: str, owner: str, outcome: str) -> bool:
        """Keep a finished run's outcome on the job while its completion cannot be written, so
        whoever completes the job later lands this outcome; False when the job is not ours."""
        return self._update_held_job(
            job_id, owner, "SET pending_outcome = :outcome", {":outcome": outcome}
        )

    def _update_held_job(
        self, job_id: str, owner: str, update: str, values: Mapping[str, Any]
    ) -> bool:
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=_job_key(job_id),
                UpdateExpression=update,
                # Cancelled, expired or taken over: the worker must stop.
                ConditionExpression="#status = :running AND lease_owner = :owner",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=to_item(
                    {**values, ":running": "running", ":owner": owner}
                ),
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def mark_dispatched(self, job_id: str, *, now: int) -> bool:
        """Note a (re-)dispatch of a queued job; False when it is no longer queued."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=_job_key(job_id),
                UpdateExpression="SET dispatched_at = :now",
                # Only a job still waiting for a worker is worth sending again.
                ConditionExpression="#status = :queued",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=to_item({":now": now, ":queued": "queued"}),
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def get_job_and_event_at(
        self, job_id: str, sequence: int | None
    ) -> tuple[JobRecord | None, int | None]:
        """The job and the `at` of its event `sequence` (None if there is no such event), read
        together in one call. An event is never rewritten, so its `at` read here stays true."""
        if sequence is None:
            return self.get_job(job_id), None
        event_key = to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.event_sk(sequence)})
        wanted = [_job_key(job_id), event_key]
        found: list[Mapping[str, Any]] = []
        for attempt in range(_BATCH_READ_ATTEMPTS):
            if attempt:
                policy = default_policy()  # jittered, as AWS advises
                policy.sleep(policy.delay_ms(attempt) / 1000)
            response = self.client.batch_get_item(
                RequestItems={self.table_name: {"Keys": wanted, "ConsistentRead": True}},
                ReturnConsumedCapacity="TOTAL",
            )
            found += response.get("Responses", {}).get(self.table_name, [])
            wanted = response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", [])
            if not wanted:
                break
        else:
            # Throttled throughout: read what is left one item at a time.
            for key in wanted:
                item = self.client.get_item(
                    TableName=self.table_name,
                    Key=key,
                    ConsistentRead=True,
                    ReturnConsumedCapacity="TOTAL",
                )
                if "Item" in item:
                    found.append(item["Item"])
        job_sk = to_attribute(keys.JOB_SK)
        job = next((item for item in found if item[keys.SK] == job_sk), None)
        event = next((item for item in found if item[keys.SK] != job_sk), None)
        record = item_to_record(job) if job else None
        return record, (int(from_attribute(event["at"])) if event and "at" in event else None)

    def advance_ack(self, job_id: str, sequence: int) -> bool:
        """Move the ack cursor forward to `sequence`; False when that would not move it forward
        (nothing written). The caller has checked that the event exists."""
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=_job_key(job_id),
                UpdateExpression="SET ack_sequence = :seq",
                # Monotonic: an older or equal position is a no-op, whoever got there first;
                # and never a job item made of a cursor alone.
                ConditionExpression=(
                    "attribute_exists(#pk) AND "
                    "(attribute_not_exists(ack_sequence) OR ack_sequence < :seq)"
                ),
                ExpressionAttributeNames={"#pk": keys.PK},
                ExpressionAttributeValues=to_item({":seq": sequence}),
                ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    # -- items -------------------------------------------------------------------------------

    def _put_event(self, event: StoredEvent, *, expires_at: int | None = None) -> dict[str, Any]:
        values: dict[str, Any] = {
            keys.PK: keys.job_pk(event.job_id),
            keys.SK: keys.event_sk(event.sequence),
            "kind": event.kind,
            "at": event.at,
        }
        if expires_at is not None:
            # The terminal event: the job's expiry, and the RETIRING backlog entry that the
            # retention step removes once the job's earlier items carry the expiry too.
            values[keys.TTL_ATTRIBUTE] = expires_at
            values["sweep_pk"] = keys.job_sweep_pk(keys.RETIRING_JOBS, event.job_id)
            values["sweep_sk"] = keys.sweep_sk(
                event.at + keys.HANDOFF_GRACE_MS,
                keys.intent_item_id(event.job_id, event.sequence),
            )
        return {
            "Put": {
                "TableName": self.table_name,
                "Item": to_item(values),
                # An event position is written once; ids stay stable.
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": keys.PK},
            }
        }

    def _put_intent(
        self,
        record: JobRecord,
        event: StoredEvent,
        intent: CallbackIntent,
        *,
        retain_until: int | None = None,
    ) -> dict[str, Any]:
        item_id = keys.intent_item_id(record.job_id, event.sequence)
        # The terminal event's intent is open when its job finishes: it learns the job's expiry
        # now and takes it as its own when it closes (store/callbacks.py: stamp).
        retention = {} if retain_until is None else {"retain_until": retain_until}
        return {
            "Put": {
                "TableName": self.table_name,
                "Item": to_item(
                    {
                        **retention,
                        keys.PK: keys.job_pk(record.job_id),
                        keys.SK: keys.intent_sk(event.sequence),
                        "job_id": record.job_id,
                        "tenant": record.tenant,
                        "sequence": event.sequence,
                        "event_id": intent.event_id,
                        "callback_url": intent.url,
                        "idempotency_key": f"job-event:{record.job_id}:{intent.event_id}",
                        "kind": event.kind,
                        "state": CALLBACK_PENDING,
                        "attempts": 0,
                        "max_attempts": MAX_CALLBACK_ATTEMPTS,
                        # The event's own `at`: with `kind` and `sequence`, the event itself.
                        "created_at": event.at,
                        "next_attempt_at": event.at,
                        # Sparse index entry while open: if no delivery picks the intent up
                        # within the grace period (the hand-off was lost), the sweep sends it.
                        "sweep_pk": keys.job_sweep_pk(keys.CALLBACK_HANDOFF, record.job_id),
                        "sweep_sk": keys.sweep_sk(event.at + keys.HANDOFF_GRACE_MS, item_id),
                        **({"base_url": intent.base_url} if intent.base_url else {}),
                    }
                ),
                # One intent per event, ever.
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": keys.PK},
            }
        }

    def active_jobs(self) -> Iterator[str]:
        """Jobs whose stream has no terminal event yet, oldest first (read lazily)."""
        for sort_key in sweep_entries(self.client, self.table_name, keys.ACTIVE_JOBS):
            yield sort_key.split("#", 1)[1]

    # -- retention ---------------------------------------------------------------------------

    def unstamped_events(self, job_id: str, below: int) -> list[int]:
        """Sequences of the job's events before `below` that do not carry the expiry yet."""
        items = self._job_range(
            job_id,
            keys.event_sk(1),
            keys.event_sk(below - 1),
            projection=(keys.SK, keys.TTL_ATTRIBUTE),
        )
        return [
            keys.sequence_of(item[keys.SK]["S"]) for item in items if keys.TTL_ATTRIBUTE not in item
        ]

    def stamp_event(self, job_id: str, sequence: int, expires_at: int) -> None:
        """Give one event its job's expiry (epoch seconds)."""
        self._update_event(
            job_id,
            sequence,
            "SET #expires = :expires",
            # Stamp an event that exists; never make an item of an expiry alone.
            "attribute_exists(#pk)",
            names={"#pk": keys.PK, "#expires": keys.TTL_ATTRIBUTE},
            values={":expires": expires_at},
        )

    def retiring(self, *, now: int) -> Iterator[tuple[str, int]]:
        """(job id, terminal sequence) of finished jobs whose items may still lack their expiry,
        due by `now`, oldest first (read lazily)."""
        for sort_key in sweep_entries(
            self.client, self.table_name, keys.RETIRING_JOBS, before=keys.sweep_due_bound(now)
        ):
            _, job_id, sequence = sort_key.split("#")
            yield job_id, int(sequence)

    def finish_retiring(self, job_id: str, sequence: int) -> None:
        """Take a finished job off the RETIRING backlog (every item of it carries its expiry)."""
        self._update_event(
            job_id,
            sequence,
            "REMOVE sweep_pk, sweep_sk",
            # Only the terminal event's own entry; never create an item.
            "begins_with(sweep_pk, :retiring)",
            values={":retiring": keys.RETIRING_JOBS},
        )

    def _update_event(
        self,
        job_id: str,
        sequence: int,
        update: str,
        condition: str,
        *,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any],
    ) -> None:
        """One conditional update of an event item; a failed condition is a no-op."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.event_sk(sequence)}),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": to_item(values),
            "ReturnConsumedCapacity": "TOTAL",
        }
        if names:
            request["ExpressionAttributeNames"] = dict(names)
        try:
            self.client.update_item(**request)
        except ClientError as error:
            if not _condition_failed(error):
                raise

    def purge_expired(self, job_id: str, *, now_s: int) -> int:
        """Delete what is left of an expired job (TTL deletes in the background, item by item,
        within days), so that its key can admit a new job; returns how many items went."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk",
            "ProjectionExpression": "#pk, #sk",
            "ExpressionAttributeNames": {"#pk": keys.PK, "#sk": keys.SK},
            "ExpressionAttributeValues": to_item({":pk": keys.job_pk(job_id)}),
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        deleted = 0
        while True:
            response = self.client.query(**request)
            for key in response.get("Items", []):
                try:
                    self.client.delete_item(
                        TableName=self.table_name,
                        Key=key,
                        # Only what belongs to the expired job: its stamped items, and intents
                        # that learnt its (past) expiry; a live job's items carry neither.
                        ConditionExpression="#expires <= :now OR retain_until <= :now",
                        ExpressionAttributeNames={"#expires": keys.TTL_ATTRIBUTE},
                        ExpressionAttributeValues=to_item({":now": now_s}),
                        ReturnConsumedCapacity="TOTAL",
                    )
                    deleted += 1
                except ClientError as error:
                    if not _condition_failed(error):
                        raise
            if "LastEvaluatedKey" not in response:
                return deleted
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def callback_intents(self, job_id: str) -> list[dict[str, Any]]:
        """Every callback intent recorded for a job, in event order."""
        items = self._job_range(job_id, keys.intent_sk(1), keys.intent_sk(_LAST_SEQUENCE))
        return [from_item(item) for item in items]

    def _job_range(
        self,
        job_id: str,
        low: str,
        high: str,
        limit: int | None = None,
        projection: tuple[str, ...] = (),
    ) -> list[dict[str, Any]]:
        """Items of one job whose sort keys lie in [low, high], in key order (all of them when
        there is no `limit`; only the `projection` attributes, when given)."""
        names = {"#pk": keys.PK, "#sk": keys.SK}
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(
                {":pk": keys.job_pk(job_id), ":low": low, ":high": high}
            ),
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if projection:
            names.update({f"#a{index}": name for index, name in enumerate(projection)})
            request["ProjectionExpression"] = ", ".join(
                f"#a{index}" for index in range(len(projection))
            )
        if limit is not None:
            request["Limit"] = limit
            items: list[dict[str, Any]] = self.client.query(**request).get("Items", [])
            return items
        items = []
        while True:
            response = self.client.query(**request)
            items += response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return items
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _once_per_job_clause(
    kind: str, names: dict[str, str], values: dict[str, Any], conditions: list[str]
) -> str:
    """The guard and the ADD clause of an event whose kind may stand once in its job's stream."""
    names["#kinds"] = "recorded_kinds"
    values[":kind"] = kind
    values[":kinds"] = frozenset({kind})
    # At most once per lifecycle kind, whoever races us.
    conditions.append("NOT contains(#kinds, :kind)")
    return " ADD #kinds :kinds"


def _terminal_clause(
    expires_at: int, names: dict[str, str], values: dict[str, Any], assignments: list[str]
) -> list[str]:
    """The terminal event's update of its job; returns the attributes it removes."""
    # The stream is complete: the job leaves the sweep's active set in the same write, and is
    # kept for the retention period from now on.
    names["#expires"] = keys.TTL_ATTRIBUTE
    values[":expires"] = expires_at
    assignments.append("#expires = :expires")
    return ["sweep_pk", "sweep_sk"]


def _apply_change(
    change: StateChange,
    names: dict[str, str],
    values: dict[str, Any],
    assignments: list[str],
    conditions: list[str],
) -> tuple[str, ...]:
    """Add a state change's assignments and guards to an update; returns what it removes."""
    for index, (name, value) in enumerate(change.values.items()):
        names[f"#c{index}"] = name
        values[f":c{index}"] = value
        assignments.append(f"#c{index} = :c{index}")
    if change.require_status is not None:
        names["#status"] = "status"
        placeholders = []
        for index, status in enumerate(sorted(change.require_status)):
            values[f":s{index}"] = status
            placeholders.append(f":s{index}")
        # A state move is valid only from the states it leaves.
        conditions.append(f"#status IN ({', '.join(placeholders)})")
    if change.require_lease_owner is not None:
        values[":owner"] = change.require_lease_owner
        # Only the worker holding the lease may move a running job.
        conditions.append("lease_owner = :owner")
    if change.require_lease_expired_at is not None:
        values[":lease_deadline"] = change.require_lease_expired_at
        # A verdict must not overrule a worker whose lease is still live.
        conditions.append(
            "(attribute_not_exists(lease_expires_at) OR lease_expires_at < :lease_deadline)"
        )
    return change.remove


def _listed(items: Iterator[dict[str, Any]], key_names: tuple[str, ...]) -> Iterator[ListedJob]:
    for item in items:
        resume_key = {name: from_attribute(item[name]) for name in key_names}
        yield ListedJob(item_to_record(item), resume_key)


def _job_key(job_id: str) -> dict[str, Any]:
    return to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.JOB_SK})


def _item_to_event(job_id: str, item: Mapping[str, Any]) -> StoredEvent:
    values = from_item(item)
    return StoredEvent(
        job_id=job_id,
        sequence=keys.sequence_of(values[keys.SK]),
        kind=values["kind"],
        at=values["at"],
    )


def _condition_failed(error: ClientError) -> bool:
    code = error_code(error)
    if code == "ConditionalCheckFailedException":
        return True
    if code != "TransactionCanceledException":
        return False
    reasons: Sequence[Mapping[str, Any]] = error.response.get("CancellationReasons", [])
    return any(reason.get("Code") == "ConditionalCheckFailed" for reason in reasons)


def encode_cursor(start_key: Mapping[str, Any]) -> str:
    raw = json.dumps(start_key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_JOB_ID: Final = r"job_[A-Za-z0-9_-]{32}"
# Exactly the keys of a job row we could have returned as LastEvaluatedKey. A cursor is the
# client's text: anything else (another shape, a key too long for DynamoDB, text that is not
# UTF-8) must be a 400, never a request DynamoDB refuses.
_CREATED_SK: Final = re.compile(rf"[0-9]{{{keys.TIME_WIDTH}}}#({_JOB_ID})")
_CURSOR_VALUES: Final = {
    keys.PK: re.compile(rf"JOB#({_JOB_ID})"),
    keys.SK: re.compile(re.escape(keys.JOB_SK)),
    "gsi1sk": _CREATED_SK,
    "gsi2sk": _CREATED_SK,
}


def decode_cursor(cursor: str) -> dict[str, Any] | None:
    """The start key a cursor carries, or None when it is not one we issued."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, binascii.Error):
        return None
    if not isinstance(value, dict) or not value or not set(value) <= set(_CURSOR_VALUES):
        return None
    job_ids: set[str] = set()
    for name, item in value.items():
        match = _CURSOR_VALUES[name].fullmatch(item) if isinstance(item, str) else None
        if match is None:
            return None
        job_ids.update(match.groups())
    # Every key names the same job.
    return value if len(job_ids) <= 1 else None
