"""The DynamoDB Streams handler shell: a batch of stream records in, one service call, the
partial batch response out (the first record Lambda must read again). The dispatcher goes
through here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobstream import deadline, observability
from jobstream import runtime as runtime_module
from jobstream.runtime import Runtime
from jobstream.sqs_handler import PartialBatchResponse, partial_batch_response

# Handles a batch of stream records; returns the sequence numbers Lambda must read again.
StreamService = Callable[[Runtime, Sequence[Mapping[str, Any]]], list[str]]


def stream_handler(
    service: StreamService,
) -> Callable[[Mapping[str, Any], Any], PartialBatchResponse]:
    """A Lambda handler for a DynamoDB Streams trigger that reports batch item failures."""

    def handler(event: Mapping[str, Any], _context: Any) -> PartialBatchResponse:
        failed = service(runtime_module.runtime(), event.get("Records") or [])
        return partial_batch_response(failed)

    # Log keys reset and metrics flushed per invocation, as for every function; the batch's AWS
    # calls start only with the time to end before the function's timeout (retries.py).
    return observability.instrument(deadline.within_invocation(handler))
