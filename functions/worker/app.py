"""SQS-triggered: runs the job each work message names, under a lease."""

from __future__ import annotations

from typing import Any

from jobstream.observability import instrument
from jobstream.service import runtime as runtime_module
from jobstream.service.execution import handle_work_message
from jobstream.service.runtime import Runtime


def _handled(rt: Runtime, record: dict[str, Any]) -> bool:
    try:
        handle_work_message(rt, record["body"], record["messageId"], record["receiptHandle"])
    except Exception:  # noqa: BLE001 - handle_work_message logged why; SQS delivers it again
        return False
    return True


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    rt = runtime_module.runtime()
    # A failed record (a deferred completion) is a batch item failure that SQS redelivers, not
    # an invocation error, even when every record of the batch failed: with one message per
    # batch, every failure would otherwise be one. (Powertools' BatchProcessor did the same, at
    # ~65 ms of cold start for asyncio and its event classes: docs/performance.md.)
    return {
        "batchItemFailures": [
            {"itemIdentifier": record["messageId"]}
            for record in event.get("Records", [])
            if not _handled(rt, record)
        ]
    }
