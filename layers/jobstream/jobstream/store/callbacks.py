"""Callbacks: reading or claiming one for an attempt, recording how it went, and the sweep's
queries.

A callback lives on its event's item (`EVT#<sequence>`): recorded in the event's own put, its
delivery state (`state`, `attempts`, `next_attempt_at`, the attempt's `lease_until`, the last
answer) is updated in place. A first attempt soon after its event takes it without a claim
(service/callbacks.py): its outcome's write counts the attempt. A watched one (one recorded
once its job left the open jobs, CallbackIntent.watched), or one that failed an attempt, sits in
the sweep index's
CALLBACK#HANDOFF shards while it is open, with the time the sweep should send it if no delivery
closed it; an attempt does not move it there (its claim writes no index key), only a retry's new
due time does. Any other is found through its job (service/callback_coverage.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.domain import (
    AttemptAnswer,
    CallbackRecord,
    CallbackState,
    Endpoint,
    IntentRef,
    JobRecord,
)
from jobstream.store import keys
from jobstream.store.client import TableStore, error_code
from jobstream.store.codec import from_item, to_item
from jobstream.store.cursor import StartKey
from jobstream.store.listing import batch_get
from jobstream.store.ports import MAX_CALLBACK_ATTEMPTS
from jobstream.store.records import EVENT_PROGRESS, item_to_record, job_key, part_key, with_parts
from jobstream.store.sweep_index import retire_legacy_shards, sweep_entries

MAX_ERROR_CHARS: Final = 1000
# Dead callbacks read to a request (BatchGetItem's most).
DEAD_READ_BATCH: Final = 100
_OPTIONAL: Final = (
    "base_url",
    "lease_until",
    "last_status",
    "last_error",
    "delivered_at",
    "dead_at",
    "dead_lettered_at",
    "expires_at",
    "retain_until",
    "resent_at",
    *EVENT_PROGRESS,
)


# What each of a tenant's lists holds (a callback that has moved on stays until the index
# catches up, and is left out).
_LISTED_STATES: Final = {
    keys.TenantCallbacks.DEAD: frozenset({CallbackState.DEAD}),
    keys.TenantCallbacks.PENDING: frozenset(
        {
            CallbackState.PENDING,
            CallbackState.IN_FLIGHT,
            CallbackState.RETRY_WAIT,
            CallbackState.PARKED,
        }
    ),
}
_JOB_ID: Final = rf"({keys.JOB_ID_PATTERN})"
_DEAD_JOB: Final = re.compile(rf"JOB#{_JOB_ID}")
_DEAD_PLACE: Final = re.compile(rf"[0-9]{{{keys.TIME_WIDTH}}}#{_JOB_ID}#[0-9]{{1,10}}")
_EVENT_KEY: Final = re.compile(rf"{keys.EVENT_PREFIX}[0-9]{{{keys.SEQUENCE_WIDTH}}}")


def _record(item: Mapping[str, Any]) -> CallbackRecord | None:
    """The callback an event item carries; None when it carries none."""
    values = from_item(item)
    if "state" not in values:
        return None
    job_id = keys.job_id_of(values[keys.PK])
    sequence = keys.sequence_of(values[keys.SK])
    at = int(values["at"])
    return CallbackRecord(
        job_id=job_id,
        sequence=sequence,
        kind=values["kind"],
        state=values["state"],
        attempts=int(values["attempts"]),
        created_at=at,
        next_attempt_at=int(values["next_attempt_at"]),
        tenant=keys.tenant_of_feed_pk(str(values.get("feed_pk", ""))),
        indexed="sweep_pk" in values,
        **{name: values[name] for name in _OPTIONAL if name in values},
    )


def _answer(answer: AttemptAnswer) -> dict[str, Any]:
    """The last answer's values (`last_status`, `last_error`) of an attempt that failed."""
    return {":status": answer.status, ":error": answer.error[:MAX_ERROR_CHARS]}


def _ref_from_sweep_key(sort_key: str) -> IntentRef:
    # sweep_sk = <due>#<job_id>#<sequence>; job ids never contain '#'.
    _, job_id, sequence = sort_key.split("#")
    return IntentRef(job_id, int(sequence))


class CallbackStore(TableStore):
    def _key(self, ref: IntentRef) -> dict[str, Any]:
        return to_item({keys.PK: keys.job_pk(ref.job_id), keys.SK: keys.event_sk(ref.sequence)})

    def get(self, ref: IntentRef) -> CallbackRecord | None:
        response = self.client.get_item(
            TableName=self.table_name,
            Key=self._key(ref),
            ConsistentRead=True,
            ReturnConsumedCapacity="TOTAL",
        )
        item = response.get("Item")
        return _record(item) if item else None

    def get_with_job(
        self, ref: IntentRef, *, with_result: bool = True
    ) -> tuple[CallbackRecord | None, JobRecord | None]:
        """The callback and its job with the job's result (as `get` and `JobStore.get_jobs`
        read them), in one consistent read of three items of the job's partition: an attempt's
        reads in one round trip. A body shows the result for a terminal event alone: without
        `with_result` (the message said its event is none), two items and no result."""
        wanted = [self._key(ref), job_key(ref.job_id)]
        if with_result:
            wanted.append(part_key(ref.job_id, keys.RESULT_SK))
        found = batch_get(self.client, self.table_name, wanted, consistent=True)
        by_sort_key = {item[keys.SK]["S"]: item for item in found}
        event = by_sort_key.get(keys.event_sk(ref.sequence))
        job = by_sort_key.get(keys.JOB_SK)
        return (
            _record(event) if event is not None else None,
            with_parts(item_to_record(job), found) if job is not None else None,
        )

    def get_many(self, refs: Sequence[IntentRef]) -> dict[IntentRef, CallbackRecord]:
        """The callbacks of `refs` that exist (as `get` reads each), read together: up to 100
        a request."""
        items = batch_get(
            self.client, self.table_name, [self._key(ref) for ref in refs], consistent=True
        )
        return {record.ref: record for record in map(_record, items) if record is not None}

    def _update(
        self,
        ref: IntentRef,
        update: str,
        condition: str,
        values: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
    ) -> CallbackRecord | None:
        """One conditional update; None when the condition did not hold (nothing written)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": self._key(ref),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": to_item(values),
            "ReturnValues": "ALL_NEW",
            "ReturnConsumedCapacity": "TOTAL",
        }
        if names:
            request["ExpressionAttributeNames"] = dict(names)
        try:
            response = self.client.update_item(**request)
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None
            raise
        return _record(response["Attributes"])

    def claim(self, ref: IntentRef, *, now: int, lease_ms: int) -> CallbackRecord | None:
        """Take the callback for one attempt; None when it is not due, done, held by another,
        or its attempts are spent (an abandoned last attempt: the caller marks it dead). No
        index key moves: the sweep tells a live attempt from a dead one by its lease."""
        return self._update(
            ref,
            "SET #state = :in_flight, attempts = attempts + :one, lease_until = :lease",
            # One attempt at a time: only a due, open callback or an abandoned attempt is taken,
            # and never past the budget (attempts that never returned count too).
            "((#state IN (:pending, :retry_wait) AND next_attempt_at <= :now) "
            "OR (#state = :in_flight AND lease_until < :now)) AND attempts < :max",
            {
                ":in_flight": CallbackState.IN_FLIGHT,
                ":pending": CallbackState.PENDING,
                ":retry_wait": CallbackState.RETRY_WAIT,
                ":one": 1,
                ":now": now,
                ":lease": now + lease_ms,
                ":max": MAX_CALLBACK_ATTEMPTS,
            },
            {"#state": "state"},
        )

    def _finish(
        self,
        intent: CallbackRecord,
        update: str,
        values: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
        *,
        sets_attempts: bool = False,
    ) -> CallbackRecord | None:
        """Record the outcome of the attempt that read `intent` (`update`: its SET clause
        first); None when the callback is no longer as that attempt read it. A claimed one is
        in flight, its attempt counted by the claim; one a first attempt took without a claim
        is pending with no attempt, and this write counts the attempt (`sets_attempts`: the
        update sets `attempts` itself)."""
        if intent.state is not CallbackState.IN_FLIGHT and not sets_attempts:
            update = f"SET attempts = :made, {update.removeprefix('SET ')}"
            values = {**values, ":made": intent.attempts_made}
        return self._update(
            intent.ref,
            update,
            # Only the attempt that took the callback records its outcome: the claim's, or a
            # claimless first attempt's while nobody has claimed or closed it since (a
            # duplicate attempt that did has recorded its own).
            "#state = :read_state AND attempts = :read_attempts",
            {**values, ":read_state": intent.state, ":read_attempts": intent.attempts},
            {**(names or {}), "#state": "state"},
        )

    def _close(
        self, intent: CallbackRecord, assignments: str, removals: str, values: Mapping[str, Any]
    ) -> CallbackRecord | None:
        """Record a final outcome. A redriven callback (its expiry kept in `retain_until` while
        it was open again) takes its expiry back in the same write."""
        if intent.retain_until is None:
            return self._finish(intent, f"SET {assignments} REMOVE {removals}", values)
        return self._finish(
            intent,
            f"SET {assignments}, #expires = :retain REMOVE {removals}",
            {**values, ":retain": intent.retain_until},
            {"#expires": keys.TTL_ATTRIBUTE},
        )

    def mark_delivered(
        self, intent: CallbackRecord, *, now: int, status: int | None
    ) -> CallbackRecord | None:
        return self._close(
            intent,
            "#state = :delivered, delivered_at = :now, last_status = :status",
            # Off its tenant's list of retrying callbacks, if it was on it.
            "lease_until, last_error, sweep_pk, sweep_sk, gsi2pk, gsi2sk",
            {":delivered": CallbackState.DELIVERED, ":now": now, ":status": status},
        )

    def mark_retry(
        self,
        intent: CallbackRecord,
        answer: AttemptAnswer,
        *,
        next_attempt_at: int,
        tenant: str | None = None,
    ) -> CallbackRecord | None:
        """Waiting for its next attempt, in the sweep's hand-off shards by its due time; on its
        tenant's list of retrying callbacks (`tenant`), by its event's time: written once, at
        its first failure (the key stays)."""
        update = (
            "SET #state = :retry_wait, next_attempt_at = :next, last_status = :status, "
            "last_error = :error, sweep_pk = :handoff, sweep_sk = :due"
        )
        values: dict[str, Any] = {
            ":retry_wait": CallbackState.RETRY_WAIT,
            ":next": next_attempt_at,
            # In the hand-off shards from its first failure on (an unwatched callback was not).
            ":handoff": keys.job_sweep_pk(keys.SweepBacklog.CALLBACK_HANDOFF, intent.ref.job_id),
            ":due": keys.sweep_sk(next_attempt_at + keys.HANDOFF_GRACE_MS, intent.ref.item_id),
            **_answer(answer),
        }
        if tenant is not None:
            update += ", gsi2pk = :listed, gsi2sk = :placed"
            values[":listed"] = keys.tenant_callbacks_pk(tenant, keys.TenantCallbacks.PENDING)
            values[":placed"] = keys.sweep_sk(intent.created_at, intent.ref.item_id)
        return self._finish(intent, f"{update} REMOVE lease_until", values)

    def mark_dead(
        self, intent: CallbackRecord, answer: AttemptAnswer, *, now: int, tenant: str | None
    ) -> CallbackRecord | None:
        """Dead: under the operator's dead shards, and under its tenant's own list (`tenant`
        None: a callback whose job is gone, which no tenant lists)."""
        ref = intent.ref
        assignments = (
            "#state = :dead, dead_at = :now, last_status = :status, last_error = :error, "
            "sweep_pk = :dead_pk, sweep_sk = :dead_sk"
        )
        values: dict[str, Any] = {
            ":dead": CallbackState.DEAD,
            ":now": now,
            ":dead_pk": keys.job_sweep_pk(keys.SweepBacklog.CALLBACK_DEAD, ref.job_id),
            ":dead_sk": keys.sweep_sk(now, ref.item_id),
            **_answer(answer),
        }
        if tenant is not None:
            assignments += ", gsi2pk = :tenant_dead, gsi2sk = :dead_sk"
            values[":tenant_dead"] = keys.tenant_callbacks_pk(tenant, keys.TenantCallbacks.DEAD)
        return self._close(intent, assignments, "lease_until", values)

    def mark_dead_lettered(self, ref: IntentRef, *, now: int) -> bool:
        """Record that a dead callback's dead letter is in the DLQ; False when it is not dead."""
        return (
            self._update(
                ref,
                "SET dead_lettered_at = :now",
                # A callback revived meanwhile is open again: its old letter is no longer its own.
                "#state = :dead",
                {":now": now, ":dead": CallbackState.DEAD},
                {"#state": "state"},
            )
            is not None
        )

    def park(
        self, intent: CallbackRecord, answer: AttemptAnswer | None, *, endpoint: Endpoint
    ) -> CallbackRecord | None:
        """Hold the callback back while its endpoint is paused or disabled: its attempt is given
        back (the endpoint failed, not the callback), and it leaves the hand-off shards for its
        endpoint's parked partition, oldest event first, where a resume finds it."""
        values: dict[str, Any] = {
            ":parked": CallbackState.PARKED,
            ":spent": intent.attempts_made - 1,
            ":parked_pk": keys.parked_pk(endpoint.tenant, endpoint.origin),
            ":parked_sk": keys.sweep_sk(intent.created_at, intent.ref.item_id),
            ":listed": keys.tenant_callbacks_pk(endpoint.tenant, keys.TenantCallbacks.PENDING),
        }
        # Also on its tenant's list of pending callbacks (GET /callbacks?state=pending).
        update = (
            "SET #state = :parked, attempts = :spent, sweep_pk = :parked_pk, sweep_sk = :parked_sk"
            ", gsi2pk = :listed, gsi2sk = :parked_sk"
        )
        if answer is not None:
            update += ", last_status = :status, last_error = :error"
            values.update(_answer(answer))
        return self._finish(intent, f"{update} REMOVE lease_until", values, sets_attempts=True)

    def unpark(self, ref: IntentRef, *, now: int) -> bool:
        """A parked callback is due now and back in the hand-off shards (the caller sends it);
        False when it was not parked."""
        return (
            self._update(
                ref,
                # `resent_at`: the caller sends it (service/dispatcher.py sends it no more).
                "SET #state = :pending, next_attempt_at = :now, resent_at = :now, "
                "sweep_pk = :handoff, sweep_sk = :due",
                # Only a parked callback: a duplicate drain must not reopen one delivered since.
                "#state = :parked",
                {
                    ":pending": CallbackState.PENDING,
                    ":parked": CallbackState.PARKED,
                    ":now": now,
                    ":handoff": keys.job_sweep_pk(keys.SweepBacklog.CALLBACK_HANDOFF, ref.job_id),
                    ":due": keys.sweep_sk(now + keys.HANDOFF_GRACE_MS, ref.item_id),
                },
                {"#state": "state"},
            )
            is not None
        )

    def parked(self, endpoint: Endpoint, *, limit: int) -> list[IntentRef]:
        """Up to `limit` callbacks of one endpoint's parked partition, oldest event first."""
        response = self.client.query(
            TableName=self.table_name,
            IndexName=keys.SWEEP_INDEX,
            KeyConditionExpression="sweep_pk = :p",
            ExpressionAttributeValues=to_item(
                {":p": keys.parked_pk(endpoint.tenant, endpoint.origin)}
            ),
            Limit=limit,
            ScanIndexForward=True,
            ReturnConsumedCapacity="TOTAL",
        )
        return [_ref_from_sweep_key(item["sweep_sk"]["S"]) for item in response.get("Items", [])]

    def postpone(self, ref: IntentRef, *, now: int, due: int) -> bool:
        """Move the sweep's next look at an open callback to `due`, after its re-send at `now`
        (`resent_at` also keeps the dispatcher from sending it once more: service/dispatcher)."""
        return (
            self._update(
                ref,
                "SET sweep_sk = :due, resent_at = :now",
                # A finished callback has left the hand-off shards; do not put it back.
                "begins_with(sweep_pk, :handoff)",
                {
                    ":due": keys.sweep_sk(due, ref.item_id),
                    ":now": now,
                    ":handoff": keys.SweepBacklog.CALLBACK_HANDOFF.value,
                },
            )
            is not None
        )

    def mark_resent(self, ref: IntentRef, *, now: int) -> bool:
        """Note that the sweep sent an open callback without an index entry of its own again
        (it looks at it again a grace period later); False when it was closed or indexed since."""
        return (
            self._update(
                ref,
                "SET resent_at = :now",
                # Only an open one that is still the job's to watch: an indexed one is postponed.
                "#state IN (:pending, :in_flight) AND attribute_not_exists(sweep_pk)",
                {
                    ":now": now,
                    ":pending": CallbackState.PENDING,
                    ":in_flight": CallbackState.IN_FLIGHT,
                },
                {"#state": "state"},
            )
            is not None
        )

    def watch(self, ref: IntentRef, *, due: int, now: int) -> bool:
        """Give an open callback its own entry in the hand-off shards, due at `due`: its job's
        terminal callback, which covered it, is closing. False when it was closed or indexed
        since (nothing written).

        It also sets `resent_at` (now): the dispatcher reads this write from the table's stream
        and would otherwise take it for a new callback and send it once more, beside the message
        already queued or the attempt under way (a first attempt takes no claim to stop it)."""
        return (
            self._update(
                ref,
                "SET sweep_pk = :handoff, sweep_sk = :due, resent_at = :now",
                # Never an entry for a closed callback, nor a second one (a retry's stays).
                "#state IN (:pending, :in_flight) AND attribute_not_exists(sweep_pk)",
                {
                    ":handoff": keys.job_sweep_pk(keys.SweepBacklog.CALLBACK_HANDOFF, ref.job_id),
                    ":due": keys.sweep_sk(due, ref.item_id),
                    ":now": now,
                    ":pending": CallbackState.PENDING,
                    ":in_flight": CallbackState.IN_FLIGHT,
                },
                {"#state": "state"},
            )
            is not None
        )

    def revive(
        self, dead: CallbackRecord, *, now: int, by_dispatcher: bool = False
    ) -> CallbackRecord | None:
        """A dead callback gets a fresh budget and is open again; None if it was not dead.
        `by_dispatcher`: the caller sends nothing (a request path), the dispatcher hands it to
        the queue from the table's stream, as it does a new callback.

        An open callback never expires: its expiry is removed, kept in `retain_until` for the
        close that follows."""
        ref = dead.ref
        retain = dead.expires_at if dead.expires_at is not None else dead.retain_until
        # `resent_at`: the redrive sends it itself (service/dispatcher.py sends it no more);
        # without it, the dispatcher sends it.
        sent = "" if by_dispatcher else ", resent_at = :now"
        return self._update(
            ref,
            "SET #state = :pending, attempts = :zero, next_attempt_at = :now"
            + sent
            + ", sweep_pk = :handoff, sweep_sk = :due"
            + (", retain_until = :retain" if retain is not None else "")
            + " REMOVE dead_at, dead_lettered_at, #expires, gsi2pk, gsi2sk"
            + (", resent_at" if by_dispatcher else ""),
            # Only dead letters are redriven; a live callback keeps its budget.
            "#state = :dead",
            {
                ":pending": CallbackState.PENDING,
                ":zero": 0,
                ":now": now,
                ":handoff": keys.job_sweep_pk(keys.SweepBacklog.CALLBACK_HANDOFF, ref.job_id),
                ":due": keys.sweep_sk(now + keys.HANDOFF_GRACE_MS, ref.item_id),
                ":dead": CallbackState.DEAD,
                **({":retain": retain} if retain is not None else {}),
            },
            {"#state": "state", "#expires": keys.TTL_ATTRIBUTE},
        )

    # -- the sweep index ---------------------------------------------------------------------

    def due(self, *, now: int) -> Iterator[IntentRef]:
        """Open callbacks the sweep should (re)send now, oldest due first (read lazily)."""
        for sort_key in sweep_entries(
            self.client,
            self.table_name,
            keys.SweepBacklog.CALLBACK_HANDOFF,
            before=keys.sweep_due_bound(now),
        ):
            yield _ref_from_sweep_key(sort_key)

    def of_job(self, job_id: str, *, since: int, consistent: bool = True) -> list[CallbackRecord]:
        """The callbacks of a job's events, in event order; those of an earlier job under the
        same key (events older than `since`, the job's creation) are not the job's. A job has
        at most a few dozen events: read whole, page after page. `consistent=False` reads at
        half the price and may show a callback as it was a moment ago (still open)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :first AND :last",
            "ExpressionAttributeNames": {"#pk": keys.PK, "#sk": keys.SK},
            "ExpressionAttributeValues": to_item(
                {
                    ":pk": keys.job_pk(job_id),
                    ":first": keys.event_sk(1),
                    ":last": keys.event_sk(10**keys.SEQUENCE_WIDTH - 1),
                }
            ),
            "ConsistentRead": consistent,
            "ReturnConsumedCapacity": "TOTAL",
        }
        records: list[CallbackRecord] = []
        while True:
            response = self.client.query(**request)
            records += [
                record
                for record in map(_record, response.get("Items", []))
                if record is not None and record.created_at >= since
            ]
            if "LastEvaluatedKey" not in response:
                return records
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def of_tenant(
        self,
        tenant: str,
        listed: keys.TenantCallbacks,
        *,
        start: StartKey | None,
        limit: int,
        dead_since: int | None = None,
    ) -> tuple[list[CallbackRecord], StartKey | None]:
        """Up to `limit` of the tenant's callbacks on one list (dead, oldest death first;
        retrying, oldest event first) from `start`; and where the next read starts (None: no
        more). An entry whose callback has moved on since (the index lags) is left out.
        `dead_since` (the dead list only): those dead at or after it, the older ones not read."""
        condition, values = "gsi2pk = :pk", {":pk": keys.tenant_callbacks_pk(tenant, listed)}
        if dead_since is not None:
            if listed is not keys.TenantCallbacks.DEAD:
                raise ValueError("only the dead list is ordered by the time of death")
            # A dead entry's place begins with its death (`mark_dead`): the bound is the key's.
            condition += " AND gsi2sk >= :since"
            values[":since"] = keys.time_key(dead_since)
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": keys.CORRELATION_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": to_item(values),
            "Limit": limit,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if start is not None:
            request["ExclusiveStartKey"] = start
        response = self.client.query(**request)
        wanted = [{keys.PK: item[keys.PK], keys.SK: item[keys.SK]} for item in response["Items"]]
        found = batch_get(self.client, self.table_name, wanted, consistent=True)
        states = _LISTED_STATES[listed]
        records = {
            record.ref: record
            for record in map(_record, found)
            if record is not None and record.state in states
        }
        refs = [
            IntentRef(keys.job_id_of(key[keys.PK]["S"]), keys.sequence_of(key[keys.SK]["S"]))
            for key in wanted
        ]
        return [records[ref] for ref in refs if ref in records], response.get("LastEvaluatedKey")

    def is_start_key(
        self, tenant: str, listed: keys.TenantCallbacks, start: Mapping[str, Any]
    ) -> bool:
        """Whether `start` is a place in the tenant's list that `of_tenant` could have
        answered (a client's text: anything else must be a 400, never a request DynamoDB
        refuses or a read of another tenant's list)."""
        if set(start) != {"gsi2pk", "gsi2sk", keys.PK, keys.SK}:
            return False
        values = [start[name].get("S") if isinstance(start[name], dict) else None for name in start]
        if not all(isinstance(value, str) for value in values):
            return False
        job = _DEAD_JOB.fullmatch(start[keys.PK]["S"])
        place = _DEAD_PLACE.fullmatch(start["gsi2sk"]["S"])
        return (
            start["gsi2pk"]["S"] == keys.tenant_callbacks_pk(tenant, listed)
            and job is not None
            and place is not None
            and place.group(1) == job.group(1)
            and _EVENT_KEY.fullmatch(start[keys.SK]["S"]) is not None
        )

    def dead(self) -> Iterator[CallbackRecord]:
        """Dead-lettered callbacks, oldest first, with their last error (read lazily, a batch
        of items at a time: a redrive of many reads them 100 to a request, not one by one)."""
        entries = sweep_entries(self.client, self.table_name, keys.SweepBacklog.CALLBACK_DEAD)
        while refs := [_ref_from_sweep_key(key) for key in islice(entries, DEAD_READ_BATCH)]:
            found = self.get_many(refs)
            yield from (found[ref] for ref in refs if ref in found)

    def retire_legacy_shards(self, *, now: int) -> bool:
        """The sweep index's legacy shards, every kind's (store/sweep_index.py)."""
        return retire_legacy_shards(self.client, self.table_name, now=now)
