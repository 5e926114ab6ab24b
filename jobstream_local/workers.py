"""What AWS does around the functions: SQS event source mappings and scheduled invocations."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from jobstream_local.gateway import Handler, LambdaContext

logger = logging.getLogger("jobstream.local")


class QueuePoller(threading.Thread):
    """Feeds a queue to a function like Lambda's SQS integration: batches, partial batch
    failures (failed messages stay and reappear after their visibility timeout), deletes the rest.
    Receive counts and the redrive to the dead-letter queue are SQS's own (moto's)."""

    def __init__(
        self,
        *,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        function_name: str,
        handler: Handler,
        batch_size: int,
        stopping: threading.Event,
    ) -> None:
        super().__init__(name=f"poll-{function_name}", daemon=True)
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.function_name = function_name
        self.handler = handler
        self.batch_size = batch_size
        self.stopping = stopping

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.poll_once(wait_seconds=1)
            except Exception:
                logger.exception("polling %s failed", self.function_name)
                self.stopping.wait(1)

    def poll_once(self, wait_seconds: int = 0) -> int:
        """Receive one batch and invoke the function with it; returns the batch size."""
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=wait_seconds,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = response.get("Messages", [])
        if not messages:
            return 0
        event = {"Records": [self._record(message) for message in messages]}
        try:
            result = self.handler(event, LambdaContext(self.function_name)) or {}
        except Exception:
            # A failed invocation fails the whole batch: every message reappears later.
            logger.exception("%s failed on a batch of %d", self.function_name, len(messages))
            return len(messages)
        failed = {item["itemIdentifier"] for item in result.get("batchItemFailures", [])}
        done = [
            {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
            for index, message in enumerate(messages)
            if message["MessageId"] not in failed
        ]
        if done:
            # One call for the batch, as Lambda's integration deletes what a batch handled.
            refused = self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=done)
            for entry in refused.get("Failed", []):
                logger.warning(
                    "%s: a handled message was not deleted: %s", self.function_name, entry
                )
        return len(messages)

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": message.get("MessageAttributes", {}),
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": "us-east-1",
        }


def scheduled_event() -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.scheduler",
        "account": "123456789012",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": "us-east-1",
        "resources": [],
        "detail": {},
    }


class Schedule(threading.Thread):
    """Invokes a function every `interval_s` seconds, as an EventBridge schedule would."""

    def __init__(
        self, *, function_name: str, handler: Handler, interval_s: float, stopping: threading.Event
    ) -> None:
        super().__init__(name=f"schedule-{function_name}", daemon=True)
        self.function_name = function_name
        self.handler = handler
        self.interval_s = interval_s
        self.stopping = stopping

    def run(self) -> None:
        while not self.stopping.wait(self.interval_s):
            try:
                result = self.handler(scheduled_event(), LambdaContext(self.function_name))
                # The function logs what matters itself (the sweep: when it did something).
                logger.debug("%s: %s", self.function_name, result)
            except Exception:
                logger.exception("scheduled %s failed", self.function_name)
