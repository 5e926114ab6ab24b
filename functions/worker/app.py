"""SQS-triggered: runs the job each work message names, under a lease."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from jobstream.observability import instrument
from jobstream.service import runtime as runtime_module
from jobstream.service.execution import handle_work_message

# A failed record (a deferred completion) is a batch item failure that SQS redelivers, not an
# invocation error: with one message per batch, every failure would otherwise be one.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> str:
    return handle_work_message(
        runtime_module.runtime(), record.body, record.message_id, record.receipt_handle
    )


@instrument
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
