"""SQS-triggered: runs the job each work message names, under a lease."""

from __future__ import annotations

from jobstream.service.execution import handle_work_batch
from jobstream.sqs_handler import sqs_handler

handler = sqs_handler(handle_work_batch)
