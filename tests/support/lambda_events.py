"""Functions as Lambda runs them from a queue: the template's handler for a queue, and the SQS
event in the shape Lambda's integration sends."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import SimpleNamespace
from typing import Any, Final

from jobstream_local.gateway import load_handler
from jobstream_local.template import Template

WORK_QUEUE_ARN: Final = "arn:aws:sqs:us-east-1:123456789012:work"


def sqs_record(
    body: str, *, message_id: str = "m-1", receipt_handle: str = "r-1"
) -> dict[str, Any]:
    """One SQS record of the work queue, with every key Lambda sends."""
    return {
        "messageId": message_id,
        "receiptHandle": receipt_handle,
        "body": body,
        "attributes": {},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": WORK_QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def received_sqs_event(message: Mapping[str, Any]) -> dict[str, Any]:
    """The event that delivers one message as `ReceiveMessage` returned it."""
    record = sqs_record(
        message["Body"], message_id=message["MessageId"], receipt_handle=message["ReceiptHandle"]
    )
    return {"Records": [record]}


@cache
def queue_handler(queue: str) -> Any:
    """The handler of the function the template triggers from `queue` (a resource name)."""
    (source,) = [s for s in Template.load().queue_sources() if s.queue == queue]
    return load_handler(source.function)


def lambda_context(function_name: str = "f", remaining_ms: int = 30_000) -> SimpleNamespace:
    """What a handler reads of Lambda's context: its name, request id and remaining time."""
    return SimpleNamespace(
        function_name=function_name,
        aws_request_id="req-1",
        get_remaining_time_in_millis=lambda: remaining_ms,
    )
