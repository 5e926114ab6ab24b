"""What AWS does around the dispatcher: a DynamoDB Streams event source mapping.

`StreamPoller` reads a table's stream from the local endpoint (moto's DynamoDB Streams), keeps
the records the mapping's `FilterCriteria` pass (jobstream_local/event_filter.py), invokes the
function with them in Lambda's event shape, and honours partial batch responses (a failed
record and what follows it are read again, at most `max_retries` times, then skipped, as
Lambda does with `MaximumRetryAttempts`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from jobstream_local.event_filter import passes
from jobstream_local.gateway import Handler, LambdaContext

logger = logging.getLogger("jobstream.local")


class StreamPoller(threading.Thread):
    """Feeds a table's stream to a function like Lambda's DynamoDB event source mapping."""

    def __init__(
        self,
        *,
        streams: Any,
        stream_arn: str,
        function_name: str,
        handler: Handler,
        batch_size: int,
        filters: Sequence[Mapping[str, Any]],
        stopping: threading.Event,
        starting_position: str = "TRIM_HORIZON",
        max_retries: int = 3,
        idle_wait_s: float = 0.05,
        quiet_wait_s: float = 0.25,
    ) -> None:
        super().__init__(name=f"stream-{function_name}", daemon=True)
        self.streams = streams
        self.stream_arn = stream_arn
        self.function_name = function_name
        self.handler = handler
        self.batch_size = batch_size
        self.filters = list(filters)
        self.stopping = stopping
        self.starting_position = starting_position
        self.max_retries = max_retries
        self.idle_wait_s = idle_wait_s
        self.quiet_wait_s = quiet_wait_s
        # Per shard: where to read next (an iterator) and how often its batch failed.
        self._iterators: dict[str, str | None] = {}
        self._failures: dict[str, int] = {}
        # The stream's shards, described again only when one closes (an idle poll is one read).
        self._shard_ids: list[str] = []

    def run(self) -> None:
        wait_s = self.idle_wait_s
        while not self.stopping.is_set():
            try:
                if self.poll_once():
                    wait_s = self.idle_wait_s
                else:
                    self.stopping.wait(wait_s)
                    # A quiet stream is read less often, down to Lambda's own pace for a shard
                    # (four reads a second): an idle stack costs a laptop next to nothing.
                    wait_s = min(wait_s * 2, self.quiet_wait_s)
            except Exception:
                logger.exception("reading the stream for %s failed", self.function_name)
                self.stopping.wait(1)

    def drain(self) -> int:
        """Poll until the stream has nothing new; how many records were read."""
        total = 0
        while read := self.poll_once():
            total += read
        return total

    def poll_once(self) -> int:
        """Read one batch of each shard and invoke the function with what passes the filters;
        returns how many records were read."""
        if not self._shard_ids:
            description = self.streams.describe_stream(StreamArn=self.stream_arn)
            self._shard_ids = [s["ShardId"] for s in description["StreamDescription"]["Shards"]]
        read = 0
        for shard_id in self._shard_ids:
            read += self._poll_shard(shard_id)
        return read

    def _iterator(self, shard_id: str) -> str | None:
        if shard_id not in self._iterators:
            self._iterators[shard_id] = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn,
                ShardId=shard_id,
                ShardIteratorType=self.starting_position,
            )["ShardIterator"]
        return self._iterators[shard_id]

    def _poll_shard(self, shard_id: str) -> int:
        iterator = self._iterator(shard_id)
        if iterator is None:
            return 0  # a closed shard, read to its end
        response = self.streams.get_records(ShardIterator=iterator, Limit=self.batch_size)
        records = response.get("Records", [])
        self._iterators[shard_id] = response.get("NextShardIterator")
        if self._iterators[shard_id] is None:
            self._shard_ids = []  # closed, read to its end: its children show at the next poll
        chosen = [self._event_record(r) for r in records if passes(self.filters, r)]
        if not chosen:
            return len(records)
        failed_at = self._invoke(chosen)
        if failed_at is None:
            self._failures.pop(shard_id, None)
            return len(records)
        failures = self._failures.get(shard_id, 0) + 1
        if failures > self.max_retries:
            # Lambda gives up on the batch after its retries: what it named is skipped.
            logger.warning("%s: skipping a stream batch after its retries", self.function_name)
            self._failures.pop(shard_id, None)
            return len(records)
        self._failures[shard_id] = failures
        self._iterators[shard_id] = self.streams.get_shard_iterator(
            StreamArn=self.stream_arn,
            ShardId=shard_id,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=failed_at,
        )["ShardIterator"]
        return len(records)

    def _invoke(self, records: list[dict[str, Any]]) -> str | None:
        """The sequence number to read again from, or None when the batch is done."""
        try:
            result = self.handler({"Records": records}, LambdaContext(self.function_name)) or {}
        except Exception:
            logger.exception("%s failed on a stream batch", self.function_name)
            return str(records[0]["dynamodb"]["SequenceNumber"])
        failures = [str(item["itemIdentifier"]) for item in result.get("batchItemFailures", [])]
        if not failures:
            return None
        return min(failures, key=lambda number: (len(number), number))

    def _event_record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        change = dict(record.get("dynamodb", {}))
        created = change.get("ApproximateCreationDateTime")
        if created is not None and not isinstance(created, int | float):
            # boto3 parses it to a datetime; Lambda's event carries epoch seconds.
            change["ApproximateCreationDateTime"] = created.timestamp()
        return {
            "eventID": record.get("eventID"),
            "eventName": record.get("eventName"),
            "eventVersion": record.get("eventVersion", "1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": record.get("awsRegion", "us-east-1"),
            "dynamodb": change,
            "eventSourceARN": self.stream_arn,
        }
