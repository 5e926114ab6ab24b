"""The tenant's feed: every protocol event of its jobs in the order it committed (the sparse
`feed` index, FEED_SHARDS partitions a tenant), and its named cursors (one item each).

A position is an entry's `feed_sk` (`<stamp>#<job_id>#<sequence>`): one total order over all of a
tenant's shards, so one position says where a reader is in all of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.domain import StoredEvent
from jobstream.store import keys
from jobstream.store.client import TableStore, error_code
from jobstream.store.codec import from_attribute, to_item
from jobstream.store.ports import FeedEntry, FeedPage
from jobstream.store.records import EVENT_PROGRESS

# Exactly the positions the feed writes: anything else is not a place in it.
_POSITION: Final = re.compile(
    rf"[0-9]{{{keys.TIME_WIDTH}}}#job_[A-Za-z0-9_-]{{32}}#[0-9]{{{keys.SEQUENCE_WIDTH}}}"
)
# Above every position at or before a stamp ('~' sorts after every character of a position).
_PAST_STAMP: Final = "~"
# Below every position ("0" starts the earliest stamp).
_START: Final = "0"


def is_position(value: str) -> bool:
    """Whether `value` is shaped like a position the feed writes."""
    return _POSITION.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class _ShardRead:
    entries: list[FeedEntry]
    truncated: bool


class FeedStore(TableStore):
    def entries_after(
        self, tenant: str, after: str | None, *, horizon: int, limit: int
    ) -> FeedPage:
        """Up to `limit` of the tenant's entries after position `after` (from the start when
        None) that committed at or before `horizon` (epoch ms), in feed order.

        Each shard is read for a share of the page: an entry is taken only when no shard that
        still holds more could hold one before it (a merge that never skips), so a page may be
        shorter than `limit` while `more` says the next one has entries.
        """
        share = -(-limit // keys.FEED_SHARDS) + 1
        low = f"{after}#" if after is not None else _START
        high = f"{horizon:0{keys.TIME_WIDTH}d}{_PAST_STAMP}"
        reads = [
            self._read_shard(partition, low, high, share)
            for partition in keys.feed_partitions(tenant)
        ]
        # The merge may go only as far as the nearest end of a shard that was cut short.
        bounds = [read.entries[-1].position for read in reads if read.truncated]
        bound = min(bounds) if bounds else None
        merged = sorted(
            (entry for read in reads for entry in read.entries),
            key=lambda entry: entry.position,
        )
        eligible = [entry for entry in merged if bound is None or entry.position <= bound]
        return FeedPage(eligible[:limit], more=bool(bounds) or len(eligible) > limit)

    def _read_shard(self, partition: str, low: str, high: str, share: int) -> _ShardRead:
        response = self.client.query(
            TableName=self.table_name,
            IndexName=keys.FEED_INDEX,
            KeyConditionExpression="feed_pk = :pk AND feed_sk BETWEEN :low AND :high",
            ExpressionAttributeValues=to_item({":pk": partition, ":low": low, ":high": high}),
            Limit=share,
            ReturnConsumedCapacity="TOTAL",
        )
        entries = [_entry(item) for item in response.get("Items", [])]
        return _ShardRead(entries, truncated="LastEvaluatedKey" in response)

    # -- named cursors -----------------------------------------------------------------------

    def named_position(self, tenant: str, consumer: str) -> str | None:
        """Where the tenant's named cursor stands (None: never moved)."""
        pk, sk = keys.feed_cursor_key(tenant, consumer)
        item = self.client.get_item(
            TableName=self.table_name,
            Key=to_item({keys.PK: pk, keys.SK: sk}),
            ConsistentRead=True,
            ReturnConsumedCapacity="TOTAL",
        ).get("Item")
        return str(from_attribute(item["position"])) if item and "position" in item else None

    def move_named(self, tenant: str, consumer: str, position: str, *, now: int) -> str:
        """Move the named cursor forward to `position`; the position it holds afterwards (a
        cursor that is already further stays where it is)."""
        pk, sk = keys.feed_cursor_key(tenant, consumer)
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=to_item({keys.PK: pk, keys.SK: sk}),
                UpdateExpression="SET #position = :position, #updated = :now",
                # A named cursor only moves forward: a late or replayed ack never rewinds it.
                ConditionExpression="attribute_not_exists(#position) OR #position < :position",
                ExpressionAttributeNames={"#position": "position", "#updated": "updated_at"},
                ExpressionAttributeValues=to_item({":position": position, ":now": now}),
                ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            return self.named_position(tenant, consumer) or position
        return position


def _entry(item: Mapping[str, Any]) -> FeedEntry:
    position = str(from_attribute(item["feed_sk"]))
    _, job_id, sequence = position.split("#")
    progress: dict[str, Any] = {
        name: str(from_attribute(item[name])) for name in EVENT_PROGRESS if name in item
    }
    event = StoredEvent(
        job_id=job_id,
        sequence=int(sequence),
        kind=str(from_attribute(item["kind"])),
        at=int(from_attribute(item["at"])),
        **progress,
    )
    return FeedEntry(position, event)
