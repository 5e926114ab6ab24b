"""The SQS handler shell: a batch of messages in, one service call, the partial batch response
out (the messages SQS must deliver again). Both queue-triggered functions go through here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jobstream import deadline, observability
from jobstream import runtime as runtime_module
from jobstream.queue import QueueMessage
from jobstream.runtime import Runtime

PartialBatchResponse = dict[str, list[dict[str, str]]]
# Handles a batch within the invocation's remaining time (None: unknown); returns the ids of
# the messages SQS must keep.
BatchService = Callable[[Runtime, Sequence[QueueMessage], Callable[[], int] | None], list[str]]


def sqs_handler(service: BatchService) -> Callable[[Mapping[str, Any], Any], PartialBatchResponse]:
    """A Lambda handler for an SQS trigger that reports batch item failures."""

    def handler(event: Mapping[str, Any], context: Any) -> PartialBatchResponse:
        messages = [
            QueueMessage(
                message_id=record["messageId"],
                body=record["body"],
                receipt_handle=record["receiptHandle"],
                receive_count=_receive_count(record),
            )
            for record in event.get("Records", [])
        ]
        remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
        kept = service(runtime_module.runtime(), messages, remaining_ms)
        return partial_batch_response(kept)

    # Log keys reset and metrics flushed per invocation, as for the HTTP functions; the batch's
    # AWS calls start only with the time to end before the function's timeout (retries.py).
    return observability.instrument(deadline.within_invocation(handler))


def _receive_count(record: Mapping[str, Any]) -> int:
    """How many times the record's message was handed out (1 when the event does not say)."""
    count = str(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
    return int(count) if count.isdigit() else 1


def partial_batch_response(kept: Sequence[str]) -> PartialBatchResponse:
    """What Lambda reads with ReportBatchItemFailures (SQS and DynamoDB Streams alike): the
    message ids, or stream sequence numbers, of the records it must deliver again."""
    return {"batchItemFailures": [{"itemIdentifier": item} for item in kept]}
