"""DynamoDB Streams-triggered: hands what commits created to the queues (new jobs to the work
queue, new callbacks to the callback queue), off every request path. A stream batch resumes
from the first failed record (ReportBatchItemFailures)."""

from __future__ import annotations

from jobstream.service.dispatcher import dispatch_records
from jobstream.stream_handler import stream_handler

handler = stream_handler(dispatch_records)
