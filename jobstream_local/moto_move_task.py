"""SQS message move tasks (StartMessageMoveTask) on moto, which does not implement them.

A redrive of the callback dead-letter queue starts a move task, as it does on AWS. moto answered
that request with a 500 and a long traceback in the local stack's terminal, three times over
(botocore retries a 500), before the caller fell back to moving messages itself. Here the task
moves every visible message of the dead-letter queue at once, before it answers (on AWS it runs
asynchronously); the answer is a task handle, as on AWS.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

_PATCHED = "_jobstream_move_task"
# The most messages one receive returns (SQS's own limit).
_BATCH: Final = 10
# How long a message being moved stays invisible to other consumers of the dead-letter queue.
_MOVE_VISIBILITY_S: Final = 30


def _queue_by_arn(backend: Any, arn: str) -> Any:
    from moto.sqs.exceptions import QueueDoesNotExist

    for queue in backend.queues.values():
        if queue.queue_arn == arn:
            return queue
    raise QueueDoesNotExist


def start_message_move_task(
    backend: Any,
    source_arn: str,
    destination_arn: str | None = None,
    max_number_of_messages_per_second: int | None = None,  # noqa: ARG001 - AWS's rate; moved at once
) -> str:
    """Move the source queue's visible messages to the destination (without one: to the one
    queue whose dead-letter queue the source is); returns the task handle."""
    from moto.sqs.exceptions import InvalidParameterValue

    source = _queue_by_arn(backend, source_arn)
    if destination_arn:
        destination = _queue_by_arn(backend, destination_arn)
    else:
        origins = backend.list_dead_letter_source_queues(source.name)
        if len(origins) != 1:
            raise InvalidParameterValue(
                "Source queue must be configured as a Dead Letter Queue of one queue"
            )
        (destination,) = origins
    while messages := backend.receive_message(source.name, _BATCH, 0, _MOVE_VISIBILITY_S):
        for message in messages:
            # Send first, then delete: an interruption in between duplicates, never loses.
            backend.send_message(
                destination.name, message.body, message_attributes=message.message_attributes
            )
            backend.delete_message(source.name, message.receipt_handle)
    return str(uuid.uuid4())


def add_message_move_tasks() -> None:
    from moto.core.responses import ActionResult
    from moto.sqs.models import SQSBackend
    from moto.sqs.responses import SQSResponse

    if getattr(SQSBackend, _PATCHED, False):
        return

    def respond(self: Any) -> Any:
        handle = start_message_move_task(
            self.sqs_backend,
            self._get_param("SourceArn"),
            self._get_param("DestinationArn"),
            self._get_param("MaxNumberOfMessagesPerSecond"),
        )
        return ActionResult({"TaskHandle": handle})

    SQSBackend.start_message_move_task = start_message_move_task  # type: ignore[attr-defined]
    SQSResponse.start_message_move_task = respond  # type: ignore[attr-defined]
    setattr(SQSBackend, _PATCHED, True)
