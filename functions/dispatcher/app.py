"""DynamoDB Streams-triggered: hands what commits created to the queues (new jobs to the work
queue, new callbacks to the callback queue), off every request path."""

from __future__ import annotations

from typing import Any

from jobstream import runtime as runtime_module
from jobstream.observability import instrument
from jobstream.service.dispatcher import dispatch_records


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    failed = dispatch_records(runtime_module.runtime(), event.get("Records") or [])
    # A stream batch resumes from the first failed record (ReportBatchItemFailures).
    return {"batchItemFailures": [{"itemIdentifier": number} for number in failed]}
