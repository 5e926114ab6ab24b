"""Callback intents: claiming one for an attempt, recording how it went, and the sweep's queries."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.domain import (
    CALLBACK_CLOSED_STATES,
    CALLBACK_DEAD,
    CALLBACK_DELIVERED,
    CALLBACK_IN_FLIGHT,
    CALLBACK_PENDING,
    CALLBACK_RETRY_WAIT,
    CallbackRecord,
    IntentRef,
)
from jobstream.store import keys
from jobstream.store.client import dynamodb_client, error_code
from jobstream.store.codec import from_item, to_item
from jobstream.store.sweep_index import sweep_entries

_RECORD_FIELDS: Final = tuple(field.name for field in fields(CallbackRecord))
MAX_ERROR_CHARS: Final = 1000


def _record(item: Mapping[str, Any]) -> CallbackRecord:
    values = from_item(item)
    return CallbackRecord(**{name: values[name] for name in _RECORD_FIELDS if name in values})


def _ref_from_sweep_key(sort_key: str) -> IntentRef:
    # sweep_sk = <due>#<job_id>#<sequence>; job ids never contain '#'.
    _, job_id, sequence = sort_key.split("#")
    return IntentRef(job_id, int(sequence))


class CallbackStore:
    def __init__(
        self, table_name: str, client_factory: Callable[[], Any] = dynamodb_client
    ) -> None:
        self.table_name = table_name
        self._client_factory = client_factory

    @property
    def client(self) -> Any:
        return self._client_factory()

    def _key(self, ref: IntentRef) -> dict[str, Any]:
        return to_item({keys.PK: keys.job_pk(ref.job_id), keys.SK: keys.intent_sk(ref.sequence)})

    def get(self, ref: IntentRef) -> CallbackRecord | None:
        response = self.client.get_item(
            TableName=self.table_name, Key=self._key(ref), ConsistentRead=True
        )
        item = response.get("Item")
        return _record(item) if item else None

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
        """Take the intent for one attempt; None when it is not due, done, or held by another."""
        lease_until = now + lease_ms
        return self._update(
            ref,
            "SET #state = :in_flight, attempts = attempts + :one, lease_until = :lease, "
            "sweep_sk = :due",
            # One attempt at a time: only a due, open intent or an abandoned attempt is taken.
            "(#state IN (:pending, :retry_wait) AND next_attempt_at <= :now) "
            "OR (#state = :in_flight AND lease_until < :now)",
            {
                ":in_flight": CALLBACK_IN_FLIGHT,
                ":pending": CALLBACK_PENDING,
                ":retry_wait": CALLBACK_RETRY_WAIT,
                ":one": 1,
                ":now": now,
                ":lease": lease_until,
                ":due": keys.sweep_sk(lease_until + keys.HANDOFF_GRACE_MS, ref.item_id),
            },
            {"#state": "state"},
        )

    def _finish(
        self,
        intent: CallbackRecord,
        update: str,
        values: Mapping[str, Any],
        names: Mapping[str, str] | None = None,
    ) -> CallbackRecord | None:
        return self._update(
            IntentRef(intent.job_id, intent.sequence),
            update,
            # Only the attempt that claimed the intent records its outcome.
            "#state = :in_flight AND attempts = :attempts",
            {**values, ":in_flight": CALLBACK_IN_FLIGHT, ":attempts": intent.attempts},
            {**(names or {}), "#state": "state"},
        )

    def _close(
        self, intent: CallbackRecord, assignments: str, removals: str, values: Mapping[str, Any]
    ) -> CallbackRecord | None:
        """Record a final outcome. An intent whose job had finished when it was claimed takes
        its job's expiry in the same write; one that learnt it since, in a second."""
        if intent.retain_until is None:
            return self._closed(
                self._finish(intent, f"SET {assignments} REMOVE {removals}", values)
            )
        return self._closed(
            self._finish(
                intent,
                f"SET {assignments}, #expires = :retain REMOVE {removals}",
                {**values, ":retain": intent.retain_until},
                {"#expires": keys.TTL_ATTRIBUTE},
            )
        )

    def mark_delivered(
        self, intent: CallbackRecord, *, now: int, status: int | None
    ) -> CallbackRecord | None:
        return self._close(
            intent,
            "#state = :delivered, delivered_at = :now, last_status = :status, last_error = :empty",
            "lease_until, sweep_pk, sweep_sk",
            {":delivered": CALLBACK_DELIVERED, ":now": now, ":status": status, ":empty": ""},
        )

    def mark_retry(
        self,
        intent: CallbackRecord,
        *,
        next_attempt_at: int,
        status: int | None,
        error: str,
    ) -> CallbackRecord | None:
        ref = IntentRef(intent.job_id, intent.sequence)
        return self._finish(
            intent,
            "SET #state = :retry_wait, next_attempt_at = :next, last_status = :status, "
            "last_error = :error, sweep_sk = :due REMOVE lease_until",
            {
                ":retry_wait": CALLBACK_RETRY_WAIT,
                ":next": next_attempt_at,
                ":status": status,
                ":error": error[:MAX_ERROR_CHARS],
                ":due": keys.sweep_sk(next_attempt_at + keys.HANDOFF_GRACE_MS, ref.item_id),
            },
        )

    def mark_dead(
        self, intent: CallbackRecord, *, now: int, status: int | None, error: str
    ) -> CallbackRecord | None:
        ref = IntentRef(intent.job_id, intent.sequence)
        return self._close(
            intent,
            "#state = :dead, dead_at = :now, last_status = :status, last_error = :error, "
            "sweep_pk = :dead_pk, sweep_sk = :dead_sk",
            "lease_until",
            {
                ":dead": CALLBACK_DEAD,
                ":now": now,
                ":status": status,
                ":error": error[:MAX_ERROR_CHARS],
                ":dead_pk": keys.job_sweep_pk(keys.CALLBACK_DEAD, ref.job_id),
                ":dead_sk": keys.sweep_sk(now, ref.item_id),
            },
        )

    def _closed(self, closed: CallbackRecord | None) -> CallbackRecord | None:
        """An intent that just closed takes its job's expiry, if its job has finished."""
        if (
            closed is not None
            and closed.state in CALLBACK_CLOSED_STATES
            and closed.retain_until is not None
            and closed.expires_at is None
        ):
            return self.stamp(closed) or closed
        return closed

    def postpone(self, ref: IntentRef, *, due: int) -> bool:
        """Move the sweep's next look at an open intent to `due` (after a re-send)."""
        return (
            self._update(
                ref,
                "SET sweep_sk = :due",
                # A finished intent has left the hand-off shards; do not put it back.
                "begins_with(sweep_pk, :handoff)",
                {":due": keys.sweep_sk(due, ref.item_id), ":handoff": keys.CALLBACK_HANDOFF},
            )
            is not None
        )

    def revive(self, ref: IntentRef, *, now: int) -> CallbackRecord | None:
        """A dead intent gets a fresh budget and is open again; None if it was not dead (or
        its job has expired)."""
        return self._update(
            ref,
            "SET #state = :pending, attempts = :zero, next_attempt_at = :now, "
            "sweep_pk = :handoff, sweep_sk = :due REMOVE dead_at, #expires",
            # Only dead letters are redriven; a live intent keeps its budget. An open intent
            # never expires, so one whose job has expired stays dead (it goes with its job).
            "#state = :dead AND (attribute_not_exists(retain_until) OR retain_until > :now_s)",
            {
                ":now_s": now // 1000,
                ":pending": CALLBACK_PENDING,
                ":zero": 0,
                ":now": now,
                ":handoff": keys.job_sweep_pk(keys.CALLBACK_HANDOFF, ref.job_id),
                ":due": keys.sweep_sk(now + keys.HANDOFF_GRACE_MS, ref.item_id),
                ":dead": CALLBACK_DEAD,
            },
            {"#state": "state", "#expires": keys.TTL_ATTRIBUTE},
        )

    # -- retention ---------------------------------------------------------------------------

    def unstamped(self, job_id: str, below: int) -> list[tuple[IntentRef, str]]:
        """The job's intents before sequence `below` that carry no expiry yet, with their state."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ProjectionExpression": "#sk, #state, #expires",
            "ExpressionAttributeNames": {
                "#pk": keys.PK,
                "#sk": keys.SK,
                "#state": "state",
                "#expires": keys.TTL_ATTRIBUTE,
            },
            "ExpressionAttributeValues": to_item(
                {
                    ":pk": keys.job_pk(job_id),
                    ":low": keys.intent_sk(1),
                    ":high": keys.intent_sk(below - 1),
                }
            ),
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        found: list[tuple[IntentRef, str]] = []
        while True:
            response = self.client.query(**request)
            found += [
                (IntentRef(job_id, keys.sequence_of(item[keys.SK]["S"])), item["state"]["S"])
                for item in response.get("Items", [])
                if keys.TTL_ATTRIBUTE not in item
            ]
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def retain(self, ref: IntentRef, *, expires_at: int, closed: bool) -> None:
        """Tell an intent of a finished job the job's expiry: a closed intent takes it now (one
        write), an open one when it closes. Safe against a close or a revive at any moment."""
        if closed and (
            self._update(
                ref,
                "SET retain_until = :expires, #expires = :expires",
                # Closed now: nothing can deliver it any more, it may go with its job.
                "#state IN (:delivered, :dead)",
                {":expires": expires_at, ":delivered": CALLBACK_DELIVERED, ":dead": CALLBACK_DEAD},
                {"#state": "state", "#expires": keys.TTL_ATTRIBUTE},
            )
            is not None
        ):
            return
        # Open (or revived meanwhile): whoever closes it next stamps it (mark_*: _closed).
        told = self._update(
            ref,
            "SET retain_until = :expires",
            # An intent that exists; never make an item of a retention date alone.
            "attribute_exists(#pk)",
            {":expires": expires_at},
            {"#pk": keys.PK},
        )
        if told is not None and told.expires_at is None:
            # It may have closed just before: then its closer did not see the date.
            self._closed(told)

    def stamp(self, intent: CallbackRecord) -> CallbackRecord | None:
        """Give a closed intent the expiry its job told it; None when it is open again."""
        if intent.retain_until is None:
            raise ValueError("only an intent whose job has finished has an expiry")
        return self._update(
            IntentRef(intent.job_id, intent.sequence),
            "SET #expires = :expires",
            # Never an open intent: it must stay until it is delivered or dead.
            "#state IN (:delivered, :dead)",
            {
                ":expires": intent.retain_until,
                ":delivered": CALLBACK_DELIVERED,
                ":dead": CALLBACK_DEAD,
            },
            {"#state": "state", "#expires": keys.TTL_ATTRIBUTE},
        )

    # -- the sweep index ---------------------------------------------------------------------

    def due(self, *, now: int) -> Iterator[IntentRef]:
        """Open intents the sweep should (re)send now, oldest due first (read lazily)."""
        for sort_key in sweep_entries(
            self.client, self.table_name, keys.CALLBACK_HANDOFF, before=keys.sweep_due_bound(now)
        ):
            yield _ref_from_sweep_key(sort_key)

    def dead(self) -> Iterator[CallbackRecord]:
        """Dead-lettered intents, oldest first, with their last error (read lazily)."""
        for sort_key in sweep_entries(self.client, self.table_name, keys.CALLBACK_DEAD):
            record = self.get(_ref_from_sweep_key(sort_key))
            if record is not None:
                yield record
