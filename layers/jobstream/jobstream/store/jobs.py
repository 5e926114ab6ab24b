"""Jobs and their event streams in the one table (item layout: store/keys.py, store/records.py).

Every item of a job but the job item itself carries an expiry from the moment it is written
(`expires_at`, epoch seconds, computed by lifecycle/retention.py): beyond the latest time its job
can finish, and beyond any retry of a callback it carries. The job item takes its own when it
finishes. A job admitted again under an expired key overwrites what it meets of its
predecessor: the job item once expired, an event item whose `at` is older than the new job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from jobstream.domain import TERMINAL_STATUSES, CallbackState, JobRecord, JobStatus, StoredEvent
from jobstream.retries import OutOfTimeError, after_lost_answer
from jobstream.store import keys, listed, pending, quotas, results
from jobstream.store.callbacks import CallbackStore
from jobstream.store.client import TableStore, call_built, dynamodb_client, error_code
from jobstream.store.codec import from_attribute, to_attribute, to_item
from jobstream.store.cursor import decode_cursor, encode_cursor
from jobstream.store.endpoints import EndpointStore
from jobstream.store.feed import FeedStore, is_position
from jobstream.store.item_size import item_size
from jobstream.store.listing import JobListing, batch_get, iter_jobs
from jobstream.store.ports import (
    MAX_CALLBACK_ATTEMPTS,
    Append,
    CallbackIntent,
    InvalidCursorError,
    JobQuery,
    ListedJob,
    NewEvent,
    QuotaCharge,
    QuotaContendedError,
    ShownProgress,
    StaleJobError,
    StateChange,
)
from jobstream.store.quotas import Attempt
from jobstream.store.records import (
    EVENT_PROGRESS,
    GENERATION,
    correlation_entry,
    event_progress,
    is_part_of,
    item_to_record,
    job_key,
    part_key,
    record_to_item,
    with_parts,
)
from jobstream.store.resources import ResourceStore
from jobstream.store.results import from_result_attribute, to_result_attribute
from jobstream.store.sweep_index import move_sweep_cursor, sweep_cursor, sweep_entries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import PutTypeDef, TransactWriteItemTypeDef

__all__ = [
    "MAX_CALLBACK_ATTEMPTS",
    "Append",
    "CallbackIntent",
    "InvalidCursorError",
    "JobQuery",
    "JobStore",
    "ListedJob",
    "NewEvent",
    "StaleJobError",
    "StateChange",
    "decode_cursor",
    "encode_cursor",
    "item_to_record",
    "record_to_item",
]

_LAST_SEQUENCE: Final = 10**keys.SEQUENCE_WIDTH - 1
_Event = TypeVar("_Event", bound=NewEvent)
# Tries of a charged admission: a guess of the quota window that missed, then a counter changed
# by racing admissions; a refusal for a quota ends it at once.
MAX_CHARGE_TRIES: Final = 4
# The condition of every event slot: free, or taken by an event of an earlier job under the same
# key (its `at` is older than this job; a job's own events never are).
_SLOT_FREE: Final = "attribute_not_exists(#pk) OR #at < :created"
# The statuses of an ended job, as a condition's placeholders and their values.
_ENDED_VALUES: Final = {
    f":ended{index}": status.value for index, status in enumerate(sorted(TERMINAL_STATUSES))
}
_ENDED: Final = ", ".join(_ENDED_VALUES)


class JobStore(TableStore):
    def __init__(
        self,
        table_name: str,
        client_factory: Callable[[], DynamoDBClient] = dynamodb_client,
        *,
        previous_formats: bool = False,
    ) -> None:
        super().__init__(table_name, client_factory)
        # Write only what the release before reads (the first deployment of an upgrade, which
        # may be rolled back): results as maps, labels under `labels` (store/listed.py).
        self.previous_formats = previous_formats
        # The minute of the last quota window each tenant's admission counted in here: the
        # guess of the next charge (store/quotas.py), never relied on.
        self._windows: dict[str, int] = {}

    def callbacks(self) -> CallbackStore:
        return CallbackStore(self.table_name, self.client_factory)

    def endpoints(self) -> EndpointStore:
        return EndpointStore(self.table_name, self.client_factory)

    def resources(self) -> ResourceStore:
        return ResourceStore(self.table_name, self.client_factory)

    def feed(self) -> FeedStore:
        return FeedStore(self.table_name, self.client_factory)

    def is_feed_position(self, value: str) -> bool:
        return is_position(value)

    # -- reads -------------------------------------------------------------------------------

    def get_job(self, job_id: str) -> JobRecord | None:
        """The job with its ack cursor and result: one query of `#ACK`..`#RESULT`; None without
        a read for an id not shaped like a job's (a path's text: DynamoDB would refuse a key over
        2 KB rather than find nothing)."""
        if not keys.is_job_id(job_id):
            return None
        items = self._job_range(job_id, keys.ACK_SK, keys.RESULT_SK)
        job = next((item for item in items if item[keys.SK]["S"] == keys.JOB_SK), None)
        return with_parts(item_to_record(job), items) if job is not None else None

    def get_job_item(self, job_id: str) -> JobRecord | None:
        """The job item alone (ack cursor 0, no result): for writers, which need neither."""
        item = self.client.get_item(
            TableName=self.table_name,
            Key=job_key(job_id),
            ConsistentRead=True,
            ReturnConsumedCapacity="TOTAL",
        ).get("Item")
        return item_to_record(item) if item else None

    def get_job_items(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        """The job items of `job_ids` that exist (as `get_job_item` reads each), read together:
        up to 100 a request, not one request after another."""
        found = batch_get(
            self.client, self.table_name, [job_key(job_id) for job_id in job_ids], consistent=True
        )
        return {keys.job_id_of(item[keys.PK]["S"]): item_to_record(item) for item in found}

    def get_result(self, record: JobRecord) -> dict[str, Any] | None:
        """The result a run of this job stored (`put_result`), whether or not the job has
        succeeded yet; None when there is none (one of an earlier job under the same key is
        not this job's)."""
        item = self.client.get_item(
            TableName=self.table_name,
            Key=part_key(record.job_id, keys.RESULT_SK),
            ConsistentRead=True,
            ReturnConsumedCapacity="TOTAL",
        ).get("Item")
        if not item or results.ATTRIBUTE not in item or not is_part_of(record, item):
            return None
        return from_result_attribute(item[results.ATTRIBUTE])

    def get_jobs(self, job_ids: list[str]) -> dict[str, JobRecord]:
        """The jobs that exist of `job_ids`, each with its result (its ack cursor not read), in
        one batch read of up to 50 jobs a request."""
        wanted = [
            key for job_id in job_ids for key in (job_key(job_id), part_key(job_id, keys.RESULT_SK))
        ]
        found = batch_get(self.client, self.table_name, wanted, consistent=True)
        parts: dict[str, list[dict[str, Any]]] = {}
        for item in found:
            parts.setdefault(keys.job_id_of(item[keys.PK]["S"]), []).append(item)
        records: dict[str, JobRecord] = {}
        for job_id, items in parts.items():
            job = next((item for item in items if item[keys.SK]["S"] == keys.JOB_SK), None)
            if job is not None:
                records[job_id] = with_parts(item_to_record(job), items)
        return records

    def events_after(
        self, job_id: str, after_sequence: int, limit: int, *, since: int = 0
    ) -> tuple[list[StoredEvent], bool]:
        """Up to `limit` events strictly after a position, and whether more follow; events of
        an earlier job under the same key (older than `since`, the job's creation) are not read
        as the job's.

        A key-range query: its cost depends on the page, never on how many events precede it.
        """
        items = self._job_range(
            job_id, keys.event_sk(after_sequence + 1), keys.event_sk(_LAST_SEQUENCE), limit + 1
        )
        events = [_item_to_event(job_id, item) for item in items]
        events = [event for event in events if event.at >= since]
        return events[:limit], len(events) > limit

    def get_job_and_event_at(
        self, job_id: str, sequence: int | None
    ) -> tuple[JobRecord | None, int | None]:
        """The job with its ack cursor, and the `at` of its event `sequence` (None if there is
        no such event), read together in one call. An event is never rewritten, so its `at`
        read here stays true. (None, None) without a read for an id not shaped like a job's."""
        if not keys.is_job_id(job_id):
            return None, None
        wanted = [job_key(job_id), part_key(job_id, keys.ACK_SK)]
        if sequence is not None:
            wanted.append(part_key(job_id, keys.event_sk(sequence)))
        found = batch_get(self.client, self.table_name, wanted, consistent=True)
        job = next((item for item in found if item[keys.SK]["S"] == keys.JOB_SK), None)
        if job is None:
            return None, None
        record = with_parts(item_to_record(job), found)
        event = next((item for item in found if item[keys.SK]["S"].startswith("EVT#")), None)
        return record, _own_event_at(record, event)

    def iter_jobs(self, query: JobQuery) -> JobListing:
        """A tenant's jobs, newest first (store/listing.py)."""
        return iter_jobs(self.client, self.table_name, query)

    def active_jobs(self, *, after: str | None = None, before: str | None = None) -> Iterator[str]:
        """Jobs whose stream has no terminal event yet, oldest first (read lazily); those after
        (or before) a position of `open_jobs_cursor`'s only, when one is given."""
        for sort_key in sweep_entries(
            self.client,
            self.table_name,
            keys.SweepBacklog.ACTIVE_JOBS,
            after=after,
            before=before,
        ):
            yield sort_key.split("#", 1)[1]

    def open_jobs_cursor(self) -> str | None:
        """Where the last sweep's pass over open jobs stopped (store/sweep_index.py)."""
        return sweep_cursor(self.client, self.table_name, keys.SweepBacklog.ACTIVE_JOBS)

    def move_open_jobs_cursor(self, last: JobRecord | None, *, now: int) -> None:
        """Record `last` as the open job a sweep's pass stopped at; None: the pass went round."""
        position = None if last is None else keys.sweep_sk(last.created_at, last.job_id)
        move_sweep_cursor(
            self.client, self.table_name, keys.SweepBacklog.ACTIVE_JOBS, position, now=now
        )

    # -- writes ------------------------------------------------------------------------------

    def create_job(
        self,
        record: JobRecord,
        first: NewEvent,
        *,
        now_s: int,
        quota: QuotaCharge | None = None,
        clock: Callable[[], int] | None = None,
    ) -> bool:
        """Admission: the job, then its first event (with its callback), each one conditional
        write (the job describes the event, store/pending.py), with the charge of the tenant's
        quotas in the job's write when it has some (a transaction, store/quotas.py); `clock`:
        the feed's stamp is taken again just before the event's put. False when a job with this
        id exists (nothing was written); QuotaExceededError when the tenant is over a quota
        (nothing written). An expired job under the same key is replaced."""
        described = replace(record, pending_event=pending.describe(first))
        put_job: TransactWriteItemTypeDef = {
            "Put": {
                "TableName": self.table_name,
                "Item": record_to_item(described, previous_formats=self.previous_formats),
                # One idempotency key, one job: never overwrite an admitted job, unless it
                # has passed its retention (its key is free again).
                "ConditionExpression": "attribute_not_exists(#pk) OR #expires <= :now",
                "ExpressionAttributeNames": {"#pk": keys.PK, "#expires": keys.TTL_ATTRIBUTE},
                "ExpressionAttributeValues": to_item({":now": now_s}),
            }
        }
        if quota is None:
            created = _applied(
                lambda: self.client.put_item(**put_job["Put"], ReturnConsumedCapacity="TOTAL")
            )
        else:
            created = self._create_charged([put_job], self._first_attempt(quota))
        if created:
            self._write_event(record, first, clock=clock)
        return created

    def _create_charged(self, items: list[TransactWriteItemTypeDef], attempt: Attempt) -> bool:
        """The admission's transaction with its quota charge, tried again while the refusal
        says the charge's guess was wrong, not that the tenant is over a quota."""
        for _ in range(MAX_CHARGE_TRIES):
            charged = [*items, quotas.charge_item(self.table_name, attempt)]
            try:
                self.client.transact_write_items(
                    TransactItems=charged, ReturnConsumedCapacity="TOTAL"
                )
            except ClientError as error:
                reasons = _cancellation_reasons(error)
                if not _condition_failed(error):
                    raise
                if _refused(reasons, 0) or not _refused(reasons, len(items)):
                    # The job exists: a replay, whatever the quotas say (or, as without quotas,
                    # a slot of the job that is taken).
                    return False
                attempt = quotas.next_attempt(attempt, reasons[len(items)].get("Item"))
                continue
            self._windows[attempt.charge.tenant] = attempt.minute
            return True
        raise QuotaContendedError(f"the quota counter of tenant {attempt.charge.tenant!r} is busy")

    def _first_attempt(self, charge: QuotaCharge) -> Attempt:
        attempt = quotas.Attempt.first(charge)
        if charge.admissions_per_minute is None:
            return attempt
        # A minute this store has not charged in yet most likely starts its window here.
        known = self._windows.get(charge.tenant)
        return replace(attempt, new_window=known is None or known < attempt.minute)

    def append_event(
        self, record: JobRecord, append: Append, *, clock: Callable[[], int] | None = None
    ) -> None:
        """Record `append.event` as the job's next event, with its state change and callback:
        the job's conditional update first (it decides the commit, and describes the event,
        store/pending.py), then the event's put; the caller has made sure of the job's last
        event first (`settle_event`), unless it wrote it itself, as the update replaces its
        description. `clock`: the feed's stamp is taken again just before each attempt of the
        event's write (`_restamped`).

        A terminal event gives the job its own expiry and keeps it among the sweep's open jobs
        (JOB#ACTIVE) until its stream is complete: the job's entry covers the terminal event, as
        it covered the others, should its writer die before the put, and its callback, which
        has no entry of its own (`_kept_open`). A job without a callback leaves the open jobs
        at once after the put (`leave_active`); one with a callback when its terminal callback
        is closed or given an entry of its own (service/callback_coverage.py), or by the sweep.
        The quota release of a counted job rides in a transaction with the job's update. For
        the release before this one (`previous_formats`), which takes an ended job for done,
        a terminal commit is one transaction of the job's update and its event instead, the job
        leaving the open jobs with it.

        Raises StaleJobError when the job moved on since `record` was read (another writer won).
        """
        if append.event.sequence != record.event_count + 1:
            raise ValueError("an event must take the next sequence of its job")
        terminal = append.job_expires_at is not None
        if terminal and self.previous_formats:
            self._append_in_one_transaction(record, append, clock)
            return
        if terminal:
            append = _kept_open(append)
        self._write_job(record, append)
        self._write_event(record, append, clock=clock)
        if terminal and append.intent is None:
            # The stream is complete and no callback needs the job's cover. The commit stands
            # whatever this write does: should it fail, the sweep takes the job off.
            with suppress(ClientError, BotoCoreError, OutOfTimeError):
                self.leave_active(record.job_id, sequence=append.event.sequence)

    def _write_job(self, record: JobRecord, append: Append) -> None:
        """A commit's job write: one conditional update, in a transaction with the quota
        release of a counted job's terminal commit. StaleJobError when another writer won."""
        update = self._job_update(record, append)
        counted = append.releases_quota_of if append.job_expires_at is not None else None
        try:
            if counted is not None:
                # The open job leaves its tenant's count with its terminal state, or neither.
                release = quotas.release_item(self.table_name, counted)
                self.client.transact_write_items(
                    TransactItems=[update, release], ReturnConsumedCapacity="TOTAL"
                )
            else:
                self.client.update_item(**update["Update"], ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if not _condition_failed(error):
                raise
            # A retry whose first try was applied (its answer lost) is refused by that very
            # write, which the job then shows (a transaction's in its cancellation reasons).
            reasons = _cancellation_reasons(error)
            shown = reasons[0].get("Item") if counted and reasons else error.response.get("Item")
            if not (
                after_lost_answer(error)
                and _shows_update(shown if isinstance(shown, Mapping) else None, append)
            ):
                raise StaleJobError(
                    record.job_id, after_lost_answer=after_lost_answer(error)
                ) from None

    def _append_in_one_transaction(
        self, record: JobRecord, append: Append, clock: Callable[[], int] | None
    ) -> None:
        """A terminal commit as the release before wrote it: one transaction of the job's
        update and its event (and the quota release), its event stamped for the feed at each
        attempt (`_restamped`)."""
        update = self._job_update(record, append)
        try:
            call_built(
                self.client,
                "transact_write_items",
                lambda: {
                    "TransactItems": self._terminal_items(record, append, update, clock),
                    "ReturnConsumedCapacity": "TOTAL",
                },
            )
        except ClientError as error:
            if not _condition_failed(error):
                raise
            raise StaleJobError(record.job_id, after_lost_answer=after_lost_answer(error)) from None

    def leave_active(self, job_id: str, *, sequence: int) -> bool:
        """Take an ended job off the sweep's open jobs (JOB#ACTIVE), and its description of
        its terminal event with it, once that event (`sequence`) is written and needs the job's
        cover no more; False when it was not there (left already, or another job's state)."""
        return self._update_job_item(
            job_id,
            UpdateExpression="REMOVE sweep_pk, sweep_sk, #pending",
            # Only an ended job whose last event is the terminal one the caller knows
            # written: an open job never loses its cover.
            ConditionExpression=(
                f"attribute_exists(sweep_pk) AND #count = :sequence AND #status IN ({_ENDED})"
            ),
            ExpressionAttributeNames={
                "#pending": pending.ATTRIBUTE,
                "#count": "event_count",
                "#status": "status",
            },
            ExpressionAttributeValues=to_item({":sequence": sequence, **_ENDED_VALUES}),
            ReturnConsumedCapacity="TOTAL",
        )

    def _terminal_items(
        self,
        record: JobRecord,
        append: Append,
        update: TransactWriteItemTypeDef,
        clock: Callable[[], int] | None,
    ) -> list[TransactWriteItemTypeDef]:
        """A terminal commit's transaction as the release before wrote it (`previous_formats`),
        its event stamped for the feed now (`_restamped`)."""
        items: list[TransactWriteItemTypeDef] = [
            update,
            {"Put": self._event_put(record, _restamped(append, clock))},
        ]
        if append.releases_quota_of is not None:
            # The open job leaves its tenant's count with its terminal state, or neither.
            items.append(quotas.release_item(self.table_name, append.releases_quota_of))
        return items

    def _job_update(self, record: JobRecord, append: Append) -> TransactWriteItemTypeDef:
        """The job's conditional update of a commit (`append_event`)."""
        event = append.event
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
            _once_per_job_clause(event.kind, names, values, conditions)
            if append.once_per_job
            else ""
        )
        removed: list[str] = []
        if append.job_expires_at is not None:
            _expiry_clause(append.job_expires_at, names, values, assignments)
        if append.job_expires_at is not None and self.previous_formats:
            # The release before's terminal transaction: the job leaves the sweep's open jobs
            # in the same write, its events all written with it.
            removed += ["sweep_pk", "sweep_sk", pending.ATTRIBUTE]
        else:
            names["#pending"] = pending.ATTRIBUTE
            values[":pending"] = pending.describe(append)
            assignments.append("#pending = :pending")
        if append.change is not None:
            removed += _apply_change(append.change, names, values, assignments, conditions)
            removed += listed.commit_clause(
                record,
                append.change,
                listed.UpdateParts(names, values, assignments, conditions),
            )
        return {
            "Update": {
                "TableName": self.table_name,
                "Key": job_key(record.job_id),
                "UpdateExpression": "SET "
                + ", ".join(assignments)
                + _remove_clause(removed, names)
                + add_clause,
                "ConditionExpression": " AND ".join(conditions),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": to_item(values),
                # A refusal shows the job: a lost answer's retry may meet its own first try.
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def unwritten_events(self, records: Sequence[JobRecord]) -> list[JobRecord]:
        """Those of `records` whose described last event (store/pending.py) is not in the
        table, read together (eventually consistent: for descriptions written a while ago)."""
        described = [record for record in records if record.pending_event is not None]
        found = batch_get(
            self.client,
            self.table_name,
            [part_key(record.job_id, keys.event_sk(record.event_count)) for record in described],
            consistent=False,
        )
        written = {
            (keys.job_id_of(item[keys.PK]["S"]), keys.sequence_of(item[keys.SK]["S"])): item
            for item in found
        }
        return [
            record
            for record in described
            if _own_event_at(record, written.get((record.job_id, record.event_count))) is None
        ]

    def settle_event(self, record: JobRecord, *, clock: Callable[[], int]) -> bool:
        """Write the job's last event from the description its commit left on the job item
        (store/pending.py), when its writer did not (it died between its two writes); True
        when this call wrote it. `record`: the job as read, its description with it."""
        if not record.pending_event:
            return False
        found = self.client.get_item(
            TableName=self.table_name,
            Key=part_key(record.job_id, keys.event_sk(record.event_count)),
            ConsistentRead=True,
            ProjectionExpression="#at",
            ExpressionAttributeNames={"#at": "at"},
            ReturnConsumedCapacity="TOTAL",
        ).get("Item")
        if _own_event_at(record, found) is not None:
            return False
        late = pending.event_of(record, now=clock())
        return late is not None and self._write_event(record, late, clock=clock)

    def put_result(self, record: JobRecord, result: Mapping[str, Any], *, expires_at: int) -> bool:
        """Keep a finished run's result in its own item, before the completion that makes the
        job `succeeded`: written once, before the commit, in its own item (the job item stays
        small). False when a run of this job stored its result first (nothing written): the
        job's result is that one, and the completion lands it."""
        return _applied(
            lambda: self.client.put_item(
                TableName=self.table_name,
                Item=_result_item(
                    record, result, expires_at=expires_at, previous_formats=self.previous_formats
                ),
                # Written once per job: a second run (one resumed after its worker died, a
                # worker that lost its lease unknowingly) never rewrites a result a consumer
                # may have read; only an earlier job's under the same key is replaced.
                ConditionExpression="attribute_not_exists(#pk) OR #gen < :created",
                ExpressionAttributeNames={"#pk": keys.PK, "#gen": GENERATION},
                ExpressionAttributeValues=to_item({":created": record.created_at}),
                ReturnConsumedCapacity="TOTAL",
            )
        )

    def renew_lease(
        self,
        job_id: str,
        owner: str,
        *,
        now: int,
        lease_ms: int,
        progress: ShownProgress | None = None,
    ) -> bool:
        """Heartbeat: extend the lease, and show `progress` on the job in the same write (no
        write of its own); False when the job is no longer ours to run."""
        update = "SET lease_expires_at = :until, heartbeat_at = :now"
        values: dict[str, Any] = {":until": now + lease_ms, ":now": now}
        if progress is not None:
            update += ", progress_stage = :stage, updated_at = :updated"
            values |= {":stage": progress.stage, ":updated": progress.updated_at}
            if progress.message is None:
                update += " REMOVE progress_message"
            else:
                update += ", progress_message = :message"
                values[":message"] = progress.message
        return self._update_held_job(job_id, owner, update, values)

    def keep_outcome(
        self, job_id: str, owner: str, *, now: int, reason: str | None, message: str | None
    ) -> bool:
        """A run whose completion cannot be written gives the job up: its lease ends now, so
        whoever comes next (its message again, a copy, the sweep) lands its outcome at once: a
        failure's reason and message, kept here (a few KB at most), or the result already in
        its own item. False when the job is not ours."""
        update = "SET lease_expires_at = :released"
        values: dict[str, Any] = {":released": now}
        if reason is not None:
            update += ", pending_reason = :reason"
            values[":reason"] = reason
        if message is not None:
            update += ", pending_message = :message"
            values[":message"] = message
        return self._update_held_job(job_id, owner, update, values)

    def take_over(self, job_id: str, change: StateChange) -> bool:
        """A state change without an event (a running job's lease passed to another worker);
        False when its conditions did not hold (nothing written)."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        assignments: list[str] = []
        conditions: list[str] = []
        removed = _apply_change(change, names, values, assignments, conditions)
        update = "SET " + ", ".join(assignments) + _remove_clause(removed, names)
        return self._update_job_item(
            job_id,
            UpdateExpression=update,
            ConditionExpression=" AND ".join(conditions),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_item(values),
            ReturnConsumedCapacity="TOTAL",
        )

    def _update_job_item(self, job_id: str, **request: Any) -> bool:
        """One conditional update of the job's item; False when its condition did not hold
        (nothing written)."""
        return _applied(
            lambda: self.client.update_item(
                TableName=self.table_name, Key=job_key(job_id), **request
            )
        )

    def _update_held_job(
        self, job_id: str, owner: str, update: str, values: Mapping[str, Any]
    ) -> bool:
        return self._update_job_item(
            job_id,
            UpdateExpression=update,
            # Cancelled, expired or taken over: the worker must stop.
            ConditionExpression="#status = :running AND lease_owner = :owner",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=to_item(
                {**values, ":running": JobStatus.RUNNING.value, ":owner": owner}
            ),
        )

    def mark_dispatched(self, job_id: str, *, now: int) -> bool:
        """Note a (re-)dispatch of a queued job; False when it is no longer queued."""
        return self._update_job_item(
            job_id,
            UpdateExpression="SET dispatched_at = :now",
            # Only a job still waiting for a worker is worth sending again.
            ConditionExpression="#status = :queued",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=to_item({":now": now, ":queued": JobStatus.QUEUED.value}),
        )

    def mark_rerun_dispatched(self, job_id: str, *, lapsed_lease: int, now: int) -> bool:
        """Note the dispatch of a running job's next attempt after its lease lapsed at
        `lapsed_lease`; False when the job moved on or that lapse was dispatched already."""
        return self._update_job_item(
            job_id,
            UpdateExpression="SET dispatched_at = :now",
            # Once per lapse, and only while the job is still running on that lapsed lease:
            # a sweep every minute must not send the same re-run again and again.
            ConditionExpression=(
                "#status = :running AND lease_expires_at = :lease"
                " AND (attribute_not_exists(dispatched_at) OR dispatched_at < :lease)"
            ),
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=to_item(
                {":now": now, ":running": JobStatus.RUNNING.value, ":lease": lapsed_lease}
            ),
        )

    def note_waiting(self, record: JobRecord, *, stage: str, message: str, now: int) -> bool:
        """Show a queued job waiting (for a slot of a shared resource): its progress says so;
        False when it no longer waits or already shows it."""
        waiting = replace(record, progress_stage=stage, progress_message=message, updated_at=now)
        return self._update_job_item(
            record.job_id,
            UpdateExpression=(
                "SET progress_stage = :stage, progress_message = :message, updated_at = :now,"
                " #listed = :listed"
            ),
            # Once per wait, while queued; `updated_at` never goes back.
            ConditionExpression=(
                "#status = :queued AND updated_at <= :now"
                " AND (attribute_not_exists(progress_stage) OR progress_stage <> :stage)"
            ),
            ExpressionAttributeNames={"#status": "status", "#listed": listed.ATTRIBUTE},
            ExpressionAttributeValues=to_item(
                {
                    ":stage": stage,
                    ":message": message,
                    ":now": now,
                    ":queued": JobStatus.QUEUED.value,
                    ":listed": listed.shown(waiting),
                }
            ),
        )

    def advance_ack(self, record: JobRecord, sequence: int, *, expires_at: int) -> bool:
        """Move the job's ack cursor forward to `sequence`; False when that would not move it
        forward (nothing written). The caller has checked that the event exists. The cursor is
        an item of its own: an ack rewrites neither the job nor its listing entries."""
        return _applied(
            lambda: self.client.update_item(
                TableName=self.table_name,
                Key=part_key(record.job_id, keys.ACK_SK),
                UpdateExpression="SET ack_sequence = :seq, #gen = :created, #expires = :expires",
                # Monotonic: an older or equal position is a no-op, whoever got there first. A
                # cursor left by an earlier job under the same key is this job's 0.
                ConditionExpression=(
                    "attribute_not_exists(ack_sequence) OR ack_sequence < :seq OR #gen <> :created"
                ),
                ExpressionAttributeNames={"#gen": GENERATION, "#expires": keys.TTL_ATTRIBUTE},
                ExpressionAttributeValues=to_item(
                    {":seq": sequence, ":created": record.created_at, ":expires": expires_at}
                ),
                ReturnConsumedCapacity="TOTAL",
            )
        )

    # -- items -------------------------------------------------------------------------------

    def _write_event(
        self, record: JobRecord, new: NewEvent, *, clock: Callable[[], int] | None = None
    ) -> bool:
        """Put a committed event's item; False when it was there already (written from its
        description by someone who found it missing, the same event: its commit decided it).
        `clock`: its feed stamp is taken again just before each attempt (`_restamped`)."""
        return _applied(
            lambda: call_built(
                self.client,
                "put_item",
                lambda: {
                    **self._event_put(record, _restamped(new, clock)),
                    "ReturnConsumedCapacity": "TOTAL",
                },
            )
        )

    def _event_put(self, record: JobRecord, new: NewEvent) -> PutTypeDef:
        event, intent = new.event, new.intent
        values: dict[str, Any] = {
            keys.PK: keys.job_pk(event.job_id),
            keys.SK: keys.event_sk(event.sequence),
            "kind": event.kind,
            "at": event.at,
            keys.TTL_ATTRIBUTE: new.expires_at,
            **event_progress(event),
        }
        # Whatever the formats: a first event written late by another release's process must
        # not leave its job out of its correlation id's listing (a job the first step of an
        # upgrade admits is listed from both places, once: store/listing.py).
        values.update(correlation_entry(record, event.sequence))
        if new.feed_at is not None:
            # The tenant's feed (sparse index `feed`): every protocol event, in commit order.
            values["feed_pk"] = keys.feed_pk(record.tenant, event.job_id)
            values["feed_sk"] = keys.feed_sk(new.feed_at, event.job_id, event.sequence)
        if intent is not None:
            item_id = keys.intent_item_id(event.job_id, event.sequence)
            values.update(
                {"state": CallbackState.PENDING, "attempts": 0, "next_attempt_at": event.at}
            )
            if intent.watched:
                # Sparse index entry while open: if no delivery closes the callback within the
                # grace period (its hand-off was lost), the sweep sends it. An unwatched one is
                # found through its job (CallbackIntent.watched).
                values["sweep_pk"] = keys.job_sweep_pk(
                    keys.SweepBacklog.CALLBACK_HANDOFF, event.job_id
                )
                values["sweep_sk"] = keys.sweep_sk(event.at + keys.HANDOFF_GRACE_MS, item_id)
            if intent.base_url:
                values["base_url"] = intent.base_url
        return {
            "TableName": self.table_name,
            "Item": to_item(values),
            # An event position is written once; ids stay stable (I2, I3).
            "ConditionExpression": _SLOT_FREE,
            "ExpressionAttributeNames": {"#pk": keys.PK, "#at": "at"},
            "ExpressionAttributeValues": to_item({":created": record.created_at}),
        }

    def _job_range(
        self,
        job_id: str,
        low: str,
        high: str,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Items of one job whose sort keys lie in [low, high], in key order (all of them when
        there is no `limit`)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#pk": keys.PK, "#sk": keys.SK},
            "ExpressionAttributeValues": to_item(
                {":pk": keys.job_pk(job_id), ":low": low, ":high": high}
            ),
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
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


def _own_event_at(record: JobRecord, item: Mapping[str, Any] | None) -> int | None:
    """The `at` of `item`, an event item read at one of the job's positions, when it is the
    job's own; None when there is none, or it is an earlier job's under the same key (older
    than this job)."""
    at = int(from_attribute(item["at"])) if item is not None else None
    return at if at is not None and at >= record.created_at else None


def _shows_update(item: Mapping[str, Any] | None, append: Append) -> bool:
    """Whether the job item `item` holds everything a non-terminal commit of `append` writes
    (its position, its description, each attribute its change sets): that commit's own write,
    whose answer was lost (a claim's lease owner names its invocation alone)."""
    if not item:
        return False
    event = append.event
    written = {
        "event_count": event.sequence,
        "last_event_at": event.at,
        pending.ATTRIBUTE: pending.describe(append),
        **(append.change.update.assigned if append.change is not None else {}),
    }
    return all(item.get(name) == to_attribute(value) for name, value in written.items())


def _restamped(new: _Event, clock: Callable[[], int] | None) -> _Event:
    """`new` with its feed stamp taken again now, just before an attempt of its write: the
    feed's readers stay a settle window behind the newest stamps, so the stamp must not be
    older than the attempt that lands it (the job's write, or a failed attempt and the retry's
    wait, would otherwise come between; docs/protocol.md, "How it is kept")."""
    if clock is None or new.feed_at is None:
        return new
    return replace(new, feed_at=max(new.feed_at, clock()))


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


def _expiry_clause(
    expires_at: int, names: dict[str, str], values: dict[str, Any], assignments: list[str]
) -> None:
    """The terminal event's update of its job: kept for the retention period from now on."""
    names["#expires"] = keys.TTL_ATTRIBUTE
    values[":expires"] = expires_at
    assignments.append("#expires = :expires")


def _kept_open(append: Append) -> Append:
    """A terminal commit whose job stays among the sweep's open jobs until its stream is
    complete: its callback is covered by the job, as the job's other callbacks are, not by an
    entry of its own (two index writes saved, service/callback_coverage.py)."""
    if append.intent is None or not append.intent.watched:
        return append
    return replace(append, intent=replace(append.intent, watched=False))


def _apply_change(
    change: StateChange,
    names: dict[str, str],
    values: dict[str, Any],
    assignments: list[str],
    conditions: list[str],
) -> tuple[str, ...]:
    """Add a state change's assignments and guards to an update; returns what it removes."""
    for index, (name, value) in enumerate(change.update.assigned.items()):
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
    return change.update.cleared


def _remove_clause(removed: Sequence[str], names: dict[str, str]) -> str:
    """The REMOVE clause of an update removing `removed` (their names added to `names`)."""
    for index, name in enumerate(removed):
        names[f"#r{index}"] = name
    return " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removed))) if removed else ""


def _result_item(
    record: JobRecord, result: Mapping[str, Any], *, expires_at: int, previous_formats: bool
) -> dict[str, Any]:
    """A finished run's result item: its compressed JSON, with listing keys when its listing
    entry is small (store/listed.py); or as the release before wrote it."""
    item = to_item(
        {
            keys.PK: keys.job_pk(record.job_id),
            keys.SK: keys.RESULT_SK,
            GENERATION: record.created_at,
            keys.TTL_ATTRIBUTE: expires_at,
        }
    )
    if previous_formats:
        # A map, and no listing entry: the release before lists every entry as a job.
        return item | {results.ATTRIBUTE: to_attribute(dict(result))}
    item[results.ATTRIBUTE] = to_result_attribute(result)
    listing_keys = to_item(listed.result_listing_keys(record))
    entry = {name: item[name] for name in (keys.PK, keys.SK, results.ATTRIBUTE)}
    if item_size(entry | listing_keys) <= listed.LISTED_RESULT_MAX_BYTES:
        item |= listing_keys
    return item


def _item_to_event(job_id: str, item: Mapping[str, Any]) -> StoredEvent:
    return StoredEvent(
        job_id=job_id,
        sequence=keys.sequence_of(item[keys.SK]["S"]),
        kind=item["kind"]["S"],
        at=int(item["at"]["N"]),
        **{name: item[name]["S"] for name in EVENT_PROGRESS if name in item},
    )


def _applied(write: Callable[[], object]) -> bool:
    """Run one conditional write; False when its condition did not hold (nothing written)."""
    try:
        write()
    except ClientError as error:
        if _condition_failed(error):
            return False
        raise
    return True


def _condition_failed(error: ClientError) -> bool:
    code = error_code(error)
    if code == "ConditionalCheckFailedException":
        return True
    if code != "TransactionCanceledException":
        return False
    return any(
        reason.get("Code") == "ConditionalCheckFailed" for reason in _cancellation_reasons(error)
    )


def _cancellation_reasons(error: ClientError) -> Sequence[Mapping[str, Any]]:
    reasons: Sequence[Mapping[str, Any]] = error.response.get("CancellationReasons") or []
    return reasons


def _refused(reasons: Sequence[Mapping[str, Any]], index: int) -> bool:
    """Whether the transaction's item `index` failed its condition."""
    return len(reasons) > index and reasons[index].get("Code") == "ConditionalCheckFailed"
