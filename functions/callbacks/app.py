"""SQS-triggered: a batch of callback messages, delivered concurrently within the invocation's
time; the partial batch response names the messages SQS must keep (service/callback_batch.py)."""

from __future__ import annotations

from jobstream.service.callback_batch import deliver_batch
from jobstream.sqs_handler import sqs_handler

handler = sqs_handler(deliver_batch)
