"""The callback queue (SQS): hand-off of intents, retry delays, explicit dead letters."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Final, cast

from botocore.exceptions import ClientError

from jobstream.retries import RetryingClient, client_config
from jobstream.store.callbacks import IntentRef
from jobstream.store.client import ENDPOINT_VARIABLE

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

logger = logging.getLogger("jobstream.queue")
SQS_BATCH: Final = 10
MAX_VISIBILITY_S: Final = 43_200  # SQS's ceiling (12 h); longer waits go through the sweep.


@cache
def sqs_client() -> SQSClient:
    """The client every queue uses: each call retried on transient failures (jobstream.retries)."""
    import boto3  # noqa: PLC0415 - deferred: boto3 costs ~0.2 s of cold start

    client = boto3.client(
        "sqs", endpoint_url=os.environ.get(ENDPOINT_VARIABLE) or None, config=client_config()
    )
    return cast("SQSClient", RetryingClient(client, "sqs"))


def make_visible_after(
    client: SQSClient, url: str | None, receipt_handle: str, delay_ms: int
) -> None:
    """A received message comes back after `delay_ms` instead of the queue's visibility timeout."""
    if not url:
        return
    seconds = min(MAX_VISIBILITY_S, max(0, math.ceil(delay_ms / 1000)))
    client.change_message_visibility(
        QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
    )


def message_body(ref: IntentRef) -> str:
    return json.dumps({"job_id": ref.job_id, "sequence": ref.sequence}, separators=(",", ":"))


def parse_message_body(body: str) -> IntentRef:
    """The intent a queue message names; ValueError for anything else."""
    value = json.loads(body)
    job_id = value.get("job_id") if isinstance(value, dict) else None
    sequence = value.get("sequence") if isinstance(value, dict) else None
    if not isinstance(job_id, str) or not job_id or type(sequence) is not int or sequence < 1:
        raise ValueError("message body does not name a callback intent")
    return IntentRef(job_id, sequence)


class CallbackQueue:
    def __init__(
        self,
        url: str | None,
        dead_letter_url: str | None,
        client_factory: Callable[[], SQSClient] = sqs_client,
    ) -> None:
        self.url = url
        self.dead_letter_url = dead_letter_url
        self._client_factory = client_factory

    @property
    def client(self) -> SQSClient:
        return self._client_factory()

    def send(self, refs: Sequence[IntentRef]) -> int:
        """Send one message per intent; returns how many SQS accepted."""
        if not self.url:
            return 0
        sent = 0
        for start in range(0, len(refs), SQS_BATCH):
            chunk = refs[start : start + SQS_BATCH]
            response = self.client.send_message_batch(
                QueueUrl=self.url,
                Entries=[
                    {"Id": str(index), "MessageBody": message_body(ref)}
                    for index, ref in enumerate(chunk)
                ],
            )
            sent += len(response.get("Successful", []))
        return sent

    def delay(self, receipt_handle: str, delay_ms: int) -> None:
        """Make a received message visible again after `delay_ms` (the retry's backoff)."""
        make_visible_after(self.client, self.url, receipt_handle, delay_ms)

    def dead_letter(self, ref: IntentRef) -> None:
        """Put a message in the dead-letter queue now (a permanent failure or a spent budget)."""
        if self.dead_letter_url:
            self.client.send_message(QueueUrl=self.dead_letter_url, MessageBody=message_body(ref))

    def redrive_dead_letters(self) -> tuple[int, str]:
        """Move every dead letter back to the callback queue.

        An SQS message move task (on AWS asynchronous; the count is what the queue held when it
        started). The destination is named: our dead letters are sent to the dead-letter queue
        directly, so SQS knows no source queue to return them to. Without the permission to start
        a task, messages are moved by hand.
        """
        if not self.url or not self.dead_letter_url:
            return 0, "none"
        client = self.client
        dead = client.get_queue_attributes(
            QueueUrl=self.dead_letter_url,
            AttributeNames=["QueueArn", "ApproximateNumberOfMessages"],
        )["Attributes"]
        destination = client.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        try:
            client.start_message_move_task(SourceArn=dead["QueueArn"], DestinationArn=destination)
        except ClientError as error:
            logger.info("no SQS message move task (%s); moving dead letters by hand", error)
            return self._move_by_hand(self.dead_letter_url, self.url), "moved"
        return int(dead.get("ApproximateNumberOfMessages", 0)), "move-task"

    def _move_by_hand(self, dead_letter_url: str, url: str) -> int:
        moved = 0
        while True:
            response = self.client.receive_message(
                QueueUrl=dead_letter_url, MaxNumberOfMessages=SQS_BATCH, WaitTimeSeconds=0
            )
            messages = response.get("Messages", [])
            if not messages:
                return moved
            for message in messages:
                # Send first, then delete: a crash in between duplicates, never loses.
                self.client.send_message(QueueUrl=url, MessageBody=message["Body"])
                self.client.delete_message(
                    QueueUrl=dead_letter_url, ReceiptHandle=message["ReceiptHandle"]
                )
                moved += 1


def work_message_body(job_id: str) -> str:
    return json.dumps({"job_id": job_id}, separators=(",", ":"))


def parse_work_message(body: str) -> str:
    """The job a work message names; ValueError for anything else."""
    value = json.loads(body)
    job_id = value.get("job_id") if isinstance(value, dict) else None
    if not isinstance(job_id, str) or not job_id:
        raise ValueError("message body does not name a job")
    return job_id


class WorkQueue:
    """Jobs waiting for a worker. A duplicate message is harmless: claiming is conditional."""

    def __init__(
        self, url: str | None, client_factory: Callable[[], SQSClient] = sqs_client
    ) -> None:
        self.url = url
        self._client_factory = client_factory

    def delay(self, receipt_handle: str, delay_ms: int) -> None:
        """Bring a received work message back after `delay_ms` (a deferred completion)."""
        make_visible_after(self._client_factory(), self.url, receipt_handle, delay_ms)

    def send(self, job_ids: Sequence[str]) -> int:
        if not self.url:
            return 0
        sent = 0
        client = self._client_factory()
        for start in range(0, len(job_ids), SQS_BATCH):
            chunk = job_ids[start : start + SQS_BATCH]
            response = client.send_message_batch(
                QueueUrl=self.url,
                Entries=[
                    {"Id": str(index), "MessageBody": work_message_body(job_id)}
                    for index, job_id in enumerate(chunk)
                ],
            )
            sent += len(response.get("Successful", []))
        return sent
