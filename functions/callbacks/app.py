"""SQS-triggered: a batch of callback messages, delivered concurrently within the invocation's
time; the partial batch response names the messages SQS must keep (service/callback_batch.py)."""

from __future__ import annotations

from typing import Any

from jobstream.observability import instrument
from jobstream.service import runtime as runtime_module
from jobstream.service.callback_batch import QueueMessage, deliver_batch


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    messages = [
        QueueMessage(
            message_id=record["messageId"],
            body=record["body"],
            receipt_handle=record["receiptHandle"],
        )
        for record in event.get("Records", [])
    ]
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return deliver_batch(runtime_module.runtime(), messages, remaining)
