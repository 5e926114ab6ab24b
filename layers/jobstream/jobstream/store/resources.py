"""Shared resources: who holds a slot, when the next source request may start, and who waits.

    resource   PK=RESOURCE#<name>  SK=#RESOURCE
               holders           map job_id -> when its slot was taken (ms)
               next_request_at   the pace: the earliest start of the next source request
               pace_mark         the mark of the reservation that set the pace (a Turn's)
               retry_not_before  the back-off: no source request starts before it
               backoff_reason    what set the back-off (a 429, a Retry-After)
    waiter     PK=RESOURCE#<name>  SK=WAIT#<created_at:013>#<job_id>  job_id, tenant, created_at

A slot is one entry of `holders`, taken by one conditional update (a free place, or the job's
own entry: a duplicate message of a job that holds its slot finds it held, and its time set to
now) and given back by one removal; however many workers race, `holders` never has more entries
than the limit they write under. The sweep's removal holds only while the entry still has the
time it read: a job that took its slot up meanwhile (its worker acquired it again) keeps it.
On a paced resource a worker's take of its job's slot also reserves its first source request's
turn (`acquire_with_turn`): one write for both. No write here is part of a transaction: a hot
resource meets no TransactionConflict, only DynamoDB's serialization of single-item writes; a
condition that fails is an answer, not an error. service/resources.py decides; this module
writes.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.store import keys
from jobstream.store.client import TableStore, error_code
from jobstream.store.codec import from_item, to_item
from jobstream.store.ports import ResourceState, Turn, Waiter

HOLDERS: Final = "holders"
PACE_MARK: Final = "pace_mark"
# How many times a pace reservation is tried again after another worker moved the pace first.
PACE_TRIES: Final = 20
# A reservation's compare-and-set: the pace as it was read (none yet, or its time).
_PACE_UNSET: Final = "attribute_not_exists(next_request_at) OR next_request_at = :read"
_PACE_AS_READ: Final = "next_request_at = :read"
# A reservation's write of the pace: its next start, and the reservation's own mark.
_PACE_SET: Final = "next_request_at = :next, pace_mark = :mark"
# A request's turn is not before the back-off: not one set since the turn's start was chosen.
_NO_BACKOFF_AFTER_START: Final = (
    "(attribute_not_exists(retry_not_before) OR retry_not_before <= :start)"
)


def _state(name: str, item: Mapping[str, Any] | None) -> ResourceState:
    if not item:
        return ResourceState(name)
    values = from_item(item)
    holders = values.get(HOLDERS) or {}
    return ResourceState(
        name,
        holders={job_id: int(at) for job_id, at in holders.items()},
        next_request_at=int(values.get("next_request_at", 0)),
        retry_not_before=int(values.get("retry_not_before", 0)),
        backoff_reason=values.get("backoff_reason"),
        pace_mark=values.get(PACE_MARK),
    )


def _new_mark() -> str:
    return secrets.token_hex(8)


def _pace_moved(state: ResourceState, start: int, interval_ms: int) -> tuple[str, dict[str, Any]]:
    """A reservation of the turn at `start`: the compare-and-set of the pace as `state` read
    it (another worker's reservation since moves ours), and its values (with a new mark)."""
    read = state.next_request_at
    values = {":next": start + interval_ms, ":read": read, ":mark": _new_mark()}
    return (_PACE_AS_READ if read else _PACE_UNSET), values


def _marked(item: Mapping[str, Any] | None, mark: str) -> bool:
    """Whether the item a refused write found carries that write's mark: its own first try
    landed, and the client, its answer lost, sent it again."""
    return item is not None and from_item(item).get(PACE_MARK) == mark


def _condition_failed(error: ClientError) -> bool:
    return error_code(error) == "ConditionalCheckFailedException"


class ResourceStore(TableStore):
    def _key(self, name: str) -> dict[str, Any]:
        return to_item({keys.PK: keys.resource_pk(name), keys.SK: keys.RESOURCE_SK})

    def state(self, name: str, *, consistent: bool = True) -> ResourceState:
        return _state(name, self._item(name, consistent=consistent))

    def _item(self, name: str, *, consistent: bool = True) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.client.get_item(
            TableName=self.table_name,
            Key=self._key(name),
            ConsistentRead=consistent,
            ReturnConsumedCapacity="TOTAL",
        ).get("Item")
        return item

    def _update(self, name: str, **request: Any) -> tuple[Mapping[str, Any] | None, Any]:
        """One conditional update of the resource's item: (its answer, None), or (None, the item
        as it was when ALL_OLD was asked) when the condition did not hold (nothing written)."""
        try:
            answer = self.client.update_item(
                TableName=self.table_name,
                Key=self._key(name),
                ReturnConsumedCapacity="TOTAL",
                **request,
            )
        except ClientError as error:
            if not _condition_failed(error):
                raise
            return None, dict(error.response).get("Item")
        return answer, None

    def acquire(self, name: str, job_id: str, *, max_concurrent: int, now: int) -> bool:
        """Take a slot for `job_id` (or find the one it holds, its time set to `now`: the
        sweep's release of a grant it read before this take-up then fails); False when all are
        taken."""
        for _ in range(2):
            taken, old = self._update(
                name,
                UpdateExpression="SET #holders.#job = :now",
                # Never more holders than the limit; the job's own slot is already counted.
                ConditionExpression=(
                    "attribute_exists(#holders.#job)"
                    " OR (attribute_exists(#holders) AND size(#holders) < :max)"
                ),
                ExpressionAttributeNames={"#holders": HOLDERS, "#job": job_id},
                ExpressionAttributeValues=to_item({":now": now, ":max": max_concurrent}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            if taken is not None:
                return True
            if isinstance(old, dict) and HOLDERS in old:
                return False  # every slot is held
            self._make_holders(name)
        return False

    def _make_holders(self, name: str) -> None:
        self._update(
            name,
            UpdateExpression="SET #holders = :none",
            # Created once: a second creator must not wipe the slots the first gave out.
            ConditionExpression="attribute_not_exists(#holders)",
            ExpressionAttributeNames={"#holders": HOLDERS},
            ExpressionAttributeValues=to_item({":none": {}}),
        )

    def acquire_with_turn(
        self,
        name: str,
        job_id: str,
        *,
        max_concurrent: int,
        interval_ms: int,
        now: int,
        lead_ms: int,
    ) -> tuple[bool, Turn | None]:
        """Take a slot for `job_id` as `acquire` does and, in the same write, the turn of its
        first source request on the paced resource: (whether it holds a slot, the start of its
        turn). The turn is not before `now + lead_ms` (the claim comes first), the back-off or
        the pace, which moves on one interval from it. Without a turn (the pace kept moving
        under every try), the first request takes one as every other does."""
        for _ in range(PACE_TRIES):
            item = self._item(name)
            if HOLDERS not in (item or {}):
                self._make_holders(name)  # the resource's first slot
                continue
            state = _state(name, item)
            if job_id in state.holders:
                break  # its own slot (a duplicate message, a granted waiter): no turn taken
            if len(state.holders) >= max_concurrent:
                return False, None  # every slot is held
            start = max(now + lead_ms, state.retry_not_before, state.next_request_at)
            pace_condition, pace_values = _pace_moved(state, start, interval_ms)
            taken, _ = self._update(
                name,
                UpdateExpression=f"SET #holders.#job = :now, {_PACE_SET}",
                # Never more holders than the limit (as `acquire`), and the pace as read.
                ConditionExpression=(
                    "attribute_not_exists(#holders.#job) AND size(#holders) < :max"
                    f" AND ({pace_condition})"
                ),
                ExpressionAttributeNames={"#holders": HOLDERS, "#job": job_id},
                ExpressionAttributeValues=to_item(
                    {":now": now, ":max": max_concurrent, **pace_values}
                ),
            )
            if taken is not None:
                return True, Turn(start, pace_values[":mark"])
        return self.acquire(name, job_id, max_concurrent=max_concurrent, now=now), None

    def release(self, name: str, job_id: str, *, held_since: int | None = None) -> int | None:
        """Give back `job_id`'s slot: the holders left, or None when it held none (given back
        already, reclaimed by the sweep, or never taken) or, with `held_since` (the sweep's
        read), when its entry no longer has that time (the job took its slot up since)."""
        request: dict[str, Any] = {
            "UpdateExpression": "REMOVE #holders.#job",
            # Once: only the release that removes the entry wakes a waiter for it.
            "ConditionExpression": "attribute_exists(#holders.#job)",
            "ExpressionAttributeNames": {"#holders": HOLDERS, "#job": job_id},
            "ReturnValues": "ALL_NEW",
        }
        if held_since is not None:
            # The sweep judged the holder gone from this entry: a worker that acquired the slot
            # again since (a claim racing the sweep) set a new time, and keeps its slot.
            request["ConditionExpression"] = "#holders.#job = :since"
            request["ExpressionAttributeValues"] = to_item({":since": held_since})
        released, _ = self._update(name, **request)
        if released is None:
            return None
        return len(_state(name, released.get("Attributes")).holders)

    def reserve_request(
        self, name: str, *, interval_ms: int | None, now: int, replacing: Turn | None = None
    ) -> int | None:
        """When the next source request on the resource may start (not before its back-off),
        reserved for the caller when the resource is paced: the pace moves on by one interval
        from that moment, so requests of all workers start at least `interval_ms` apart.
        `replacing`: the caller's own turn, passed unused: while no later turn was taken, the
        interval it held is free again (its request never went). None: no turn could be
        reserved (the pace moved under every try); the caller tries again later."""
        if interval_ms is None:
            # Unpaced: only the back-off counts, and a read a moment stale is as good.
            return max(now, self.state(name, consistent=False).retry_not_before)
        for _ in range(PACE_TRIES):
            state = self.state(name)
            pace = state.next_request_at
            if replacing is not None and state.pace_mark == replacing.mark:
                pace = replacing.start  # the pace is still the one the unused turn set
            start = max(now, state.retry_not_before, pace)
            if start == state.next_request_at:
                # A busy resource: the pace is ahead of now and of the back-off. The turn after
                # the last one is taken in one write that no other reservation can make fail.
                after = self._reserve_after_last(name, interval_ms=interval_ms, now=now)
                if after is not None:
                    return after
                continue  # the pace fell behind now, or a back-off passed it: read again
            pace_condition, pace_values = _pace_moved(state, start, interval_ms)
            reserved, found = self._update(
                name,
                UpdateExpression=f"SET {_PACE_SET}",
                # The pace as read, and no back-off since (another worker's 429): read again.
                ConditionExpression=f"({pace_condition}) AND {_NO_BACKOFF_AFTER_START}",
                ExpressionAttributeValues=to_item({**pace_values, ":start": start}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            if reserved is not None or _marked(found, pace_values[":mark"]):
                return start
        return None

    def _reserve_after_last(self, name: str, *, interval_ms: int, now: int) -> int | None:
        """The turn the pace names, the pace moved on by one interval in the same write: its
        start, or None when the pace is behind `now` or a back-off ends after it."""
        mark = _new_mark()
        reserved, found = self._update(
            name,
            UpdateExpression=(
                "SET next_request_at = next_request_at + :interval, pace_mark = :mark"
            ),
            # The turn it names is the earliest free one only while nothing ends after it; and
            # once: a retry after a lost answer would move the pace again (a turn for nobody).
            ConditionExpression=(
                "next_request_at >= :now AND (attribute_not_exists(retry_not_before)"
                " OR retry_not_before <= next_request_at)"
                " AND (attribute_not_exists(pace_mark) OR pace_mark <> :mark)"
            ),
            ExpressionAttributeValues=to_item(
                {":interval": interval_ms, ":now": now, ":mark": mark}
            ),
            ReturnValues="UPDATED_OLD",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if reserved is not None:
            return int(from_item(reserved["Attributes"])["next_request_at"])
        if _marked(found, mark):  # the first try landed: the turn is the one before the pace
            return int(from_item(found)["next_request_at"]) - interval_ms
        return None

    def give_back_turn(self, name: str, *, turn: Turn, interval_ms: int) -> bool:
        """A reserved turn its request will not use: the pace moves back to it while no later
        turn was taken (False otherwise: the later one keeps its place)."""
        returned, _ = self._update(
            name,
            UpdateExpression="SET next_request_at = :turn, pace_mark = :fresh",
            # Only the pace our own reservation set (its mark), once: a retry of this write
            # after its first try landed and another turn was taken meets that turn's mark.
            ConditionExpression="pace_mark = :mark AND next_request_at = :next",
            ExpressionAttributeValues=to_item(
                {
                    ":turn": turn.start,
                    ":next": turn.start + interval_ms,
                    ":mark": turn.mark,
                    ":fresh": _new_mark(),
                }
            ),
        )
        return returned is not None

    def back_off(self, name: str, *, until: int, reason: str) -> bool:
        """No request on the resource starts before `until`; False when a later back-off holds."""
        extended, _ = self._update(
            name,
            UpdateExpression="SET retry_not_before = :until, backoff_reason = :reason",
            # A back-off only lengthens: an earlier answer's shorter Retry-After never cuts a
            # later, longer one short.
            ConditionExpression=(
                "attribute_not_exists(retry_not_before) OR retry_not_before < :until"
            ),
            ExpressionAttributeValues=to_item({":until": until, ":reason": reason}),
        )
        return extended is not None

    def add_waiter(self, waiter: Waiter) -> None:
        """Queue `waiter` for a slot (again: the same key, so a job waits in one place)."""
        self.client.put_item(
            TableName=self.table_name,
            Item=to_item(
                {
                    keys.PK: keys.resource_pk(waiter.resource),
                    keys.SK: waiter.sort_key,
                    "job_id": waiter.job_id,
                    "tenant": waiter.tenant,
                    "created_at": waiter.created_at,
                }
            ),
            ReturnConsumedCapacity="TOTAL",
        )

    def remove_waiter(self, waiter: Waiter) -> bool:
        """True when this call removed it: only the one that did sends the job its message."""
        try:
            self.client.delete_item(
                TableName=self.table_name,
                Key=to_item({keys.PK: keys.resource_pk(waiter.resource), keys.SK: waiter.sort_key}),
                # Once: two wakers (a release and the sweep) never both send the job.
                ConditionExpression="attribute_exists(pk)",
                ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as error:
            if _condition_failed(error):
                return False
            raise
        return True

    def waiters(self, name: str, *, limit: int) -> list[Waiter]:
        """The oldest jobs waiting for a slot of `name`, oldest first."""
        return [
            Waiter(
                name,
                values["job_id"],
                values["tenant"],
                int(values["created_at"]),
            )
            for values in self._waiter_items(name, limit=limit)
        ]

    def waiting_jobs(self, name: str) -> list[str]:
        """Every job waiting for a slot of `name`, oldest first (the sweep, the operator)."""
        return [values["job_id"] for values in self._waiter_items(name, projection="job_id")]

    def _waiter_items(
        self, name: str, *, limit: int | None = None, projection: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """The waiters' items, oldest first: `limit` of them, else all, page after page."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": to_item(
                {":pk": keys.resource_pk(name), ":prefix": keys.WAITER_PREFIX}
            ),
            # A wake-up reads the waiters as they are: one just queued must not be missed.
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if limit is not None:
            request["Limit"] = limit
        if projection is not None:
            request["ProjectionExpression"] = projection
        while True:
            response = self.client.query(**request)
            yield from (from_item(item) for item in response.get("Items", []))
            if limit is not None or "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
