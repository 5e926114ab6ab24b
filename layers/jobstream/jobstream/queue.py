"""The queues (SQS): hand-off of intents and jobs, retry delays, explicit dead letters.

Work and callback messages carry their tenant as `MessageGroupId` (where it is known): on a
standard queue that makes it an SQS fair queue, which serves a tenant with a backlog no ahead of
the others (docs/capacity.md)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final, cast

from botocore.exceptions import ClientError

from jobstream.aws import retrying_client
from jobstream.domain import IntentRef

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

logger = logging.getLogger(__name__)
SQS_BATCH: Final = 10
MAX_VISIBILITY_S: Final = 43_200  # SQS's ceiling (12 h); longer waits go through the sweep.


@dataclass(frozen=True, slots=True)
class JobDispatch:
    """A job to send to the work queue, and the tenant whose message group it joins."""

    job_id: str
    tenant: str


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One received message, as an SQS trigger hands it to a function."""

    message_id: str
    body: str
    receipt_handle: str
    # How many times SQS has handed it out, this time included (ApproximateReceiveCount).
    receive_count: int = 1


@cache
def sqs_client() -> SQSClient:
    """The client every queue uses: each call retried on transient failures (jobstream.retries)."""
    return cast("SQSClient", retrying_client("sqs"))


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


def send_in_batches(
    client: Any, url: str, bodies: Sequence[str], groups: Sequence[str | None] | None = None
) -> int:
    """Send one message per body, SQS_BATCH to a request, each in its message group when
    `groups` names one for it; returns how many SQS accepted."""
    sent = 0
    for start in range(0, len(bodies), SQS_BATCH):
        entries: list[dict[str, str]] = [
            {"Id": str(index), "MessageBody": body}
            for index, body in enumerate(bodies[start : start + SQS_BATCH])
        ]
        if groups is not None:
            for entry, group in zip(entries, groups[start : start + SQS_BATCH], strict=True):
                if group:
                    entry["MessageGroupId"] = group
        response = client.send_message_batch(QueueUrl=url, Entries=entries)
        sent += len(response.get("Successful", []))
    return sent


# A callback message's flag: its event's body shows no result (the sender knew the event's
# kind), so its attempt need not read the job's result item. Absent: read it.
WITHOUT_RESULT: Final = "without_result"


@dataclass(frozen=True, slots=True)
class CallbackMessage:
    """What a callback queue message names: the intent, and whether its body shows no result."""

    ref: IntentRef
    without_result: bool = False


def message_body(ref: IntentRef, *, without_result: bool = False) -> str:
    value: dict[str, object] = {"job_id": ref.job_id, "sequence": ref.sequence}
    if without_result:
        value[WITHOUT_RESULT] = True
    return json.dumps(value, separators=(",", ":"))


def parse_message_body(body: str) -> IntentRef:
    """The intent a queue message names; ValueError for anything else."""
    return parse_callback_message(body).ref


def parse_callback_message(body: str) -> CallbackMessage:
    """The intent a queue message names and its flag; ValueError for anything else."""
    value = json.loads(body)
    job_id = value.get("job_id") if isinstance(value, dict) else None
    sequence = value.get("sequence") if isinstance(value, dict) else None
    if not isinstance(job_id, str) or not job_id or type(sequence) is not int or sequence < 1:
        raise ValueError("message body does not name a callback intent")
    # Only a literal true skips the read: anything else reads as before.
    return CallbackMessage(IntentRef(job_id, sequence), value.get(WITHOUT_RESULT) is True)


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

    def send(
        self,
        refs: Sequence[IntentRef],
        tenants: Sequence[str | None] | None = None,
        without_result: Sequence[bool] | None = None,
    ) -> int:
        """Send one message per intent, in its tenant's message group when `tenants` names one
        for it, flagged when `without_result` says its body shows no result; returns how many
        SQS accepted."""
        if not self.url:
            return 0
        flags = without_result if without_result is not None else [False] * len(refs)
        bodies = [
            message_body(ref, without_result=flag) for ref, flag in zip(refs, flags, strict=True)
        ]
        return send_in_batches(self.client, self.url, bodies, tenants)

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


_DEPTH_ATTRIBUTES: Final = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


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

    def depth(self) -> int | None:
        """About how many messages the queue holds: waiting, delayed, or received and not yet
        deleted (SQS's approximate counts, a minute behind at worst); None without a queue."""
        if not self.url:
            return None
        attributes = self._client_factory().get_queue_attributes(
            QueueUrl=self.url, AttributeNames=list(_DEPTH_ATTRIBUTES)
        )["Attributes"]
        return sum(int(attributes.get(name, 0)) for name in _DEPTH_ATTRIBUTES)

    def send(self, jobs: Sequence[JobDispatch]) -> int:
        """Send one message per job, in its tenant's message group; how many SQS accepted."""
        if not self.url:
            return 0
        bodies = [work_message_body(job.job_id) for job in jobs]
        groups = [job.tenant for job in jobs]
        return send_in_batches(self._client_factory(), self.url, bodies, groups)
