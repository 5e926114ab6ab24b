"""moto's DynamoDB Streams, made to run for hours: each read forgets the iterator it used and
the records every reader has passed, as a stream's retention would.

moto keeps every record of a table's stream and every shard iterator it ever issued (a new one
per GetRecords): a poller that reads ten times a second would grow the process by a gigabyte a
day. An iterator expires 15 minutes after it was issued, as on AWS. Reads also take the lock of
`moto_atomic`, so that trimming never meets a transaction that is restoring the stream it
cancelled.
"""

from __future__ import annotations

import time
from typing import Any, Final

from jobstream_local.moto_atomic import _atomic

_PATCHED = "_jobstream_trimmed"
_SEEN = "_jobstream_seen_at"
ITERATOR_LIFETIME_S: Final = 15 * 60


def make_streams_bounded() -> None:
    from moto.dynamodbstreams.models import DynamoDBStreamsBackend

    if getattr(DynamoDBStreamsBackend, _PATCHED, False):
        return

    def get_records(self: Any, iterator_arn: str, limit: int) -> dict[str, Any]:
        used = self.shard_iterators.pop(iterator_arn)
        answer: dict[str, Any] = used.get(limit)
        shard = used.stream_shard
        now = time.monotonic()
        # An iterator expires 15 minutes after it was issued, as on AWS: one a reader dropped
        # (it read again from an earlier record after a failed batch) holds nothing back.
        for arn, iterator in list(self.shard_iterators.items()):
            seen = iterator.__dict__.setdefault(_SEEN, now)
            if now - seen > ITERATOR_LIFETIME_S:
                del self.shard_iterators[arn]
        # Records before every live iterator (the one just issued included) are read by all.
        positions = [used.sequence_number]
        positions += [
            i.sequence_number for i in self.shard_iterators.values() if i.stream_shard is shard
        ]
        passed = min(positions) - shard.starting_sequence_number
        if passed > 0:
            del shard.items[:passed]
            shard.starting_sequence_number += passed
        return answer

    DynamoDBStreamsBackend.get_records = _atomic(get_records)  # type: ignore[method-assign]
    setattr(DynamoDBStreamsBackend, _PATCHED, True)
