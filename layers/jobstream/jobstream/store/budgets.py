"""Size budgets: why no item this system writes can exceed DynamoDB's 400 KB item limit.

Event items (with their callbacks) and the ack cursor hold fixed fields and references only (a
callback's body is rebuilt from the job when it is sent; a progress event adds its clipped
stage and message), so the items that grow with what consumers and sources send are the job
item and the result item. Each stays within 400 KiB
(`item_size.MAX_ITEM_BYTES`): the job item holds the first two budgets, the result item the third.

- `ADMITTED_JOB_BYTES` (260 KiB): the job as admission writes it (ids, labels, params once, as
  their canonical text, callback URL, keys): every Task the API takes (`TASK_BODY_BYTES`, the
  body limit) and `ITEM_OVERHEAD_BYTES` for what the item adds to it — its keys and attribute
  names, the tenant, the correlation id again in its index key, a target named by none. So every
  body the API accepts can be stored; a job that would still be larger (it cannot be, short of a
  bug) is refused at admission (400 `invalid_params`, `detail.reason = "task_too_large"`) and
  nothing is written.
- `GROWTH_BYTES` (16 KiB): every other attribute of the job item written after admission:
  status, lease, timestamps, counters, the recorded kinds, the reason and kept failure messages
  (`pending_message`), clipped to `MAX_MESSAGE_CHARS` (at most 4 bytes a character), and the
  progress stage and message, clipped to `MAX_PROGRESS_STAGE_BYTES` and
  `MAX_PROGRESS_MESSAGE_BYTES` (each progress event's item keeps them too, and stays one write
  unit), and the description of its last event (store/pending.py: written with each commit,
  the first one included; a progress event's clipped stage and message, the request's base
  URL). The job item is these two: it never holds a copy of a result.
- `RESULT_BYTES` (128 KiB): the `result` a success writes in its own item (`#RESULT`), sized
  here as a DynamoDB map of it (`result_size`); what is written there, its compressed JSON
  (store/results.py), is smaller for any but a tiny result, and far within the item's 400 KB.
  A larger result is cut by the job type's rule before it is written (`JobType.fit_result`: a
  search keeps its best candidates; a type without a rule fails the job). That item is also a
  success's kept outcome while its completion cannot be written.

`tests/unit/test_budgets.py` builds the fattest job and result the rules allow and checks they
fit; `tests/integration/test_body_limit.py` admits bodies of exactly `TASK_BODY_BYTES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from jobstream.domain import JobRecord
from jobstream.store.codec import to_attribute
from jobstream.store.item_size import (
    attribute_size,
    first_number_refusal,
    item_size,
)
from jobstream.store.records import record_to_item

# The largest request body the API takes (http/request.py answers 413 beyond it).
TASK_BODY_BYTES: Final = 256 * 1024
ITEM_OVERHEAD_BYTES: Final = 4 * 1024
ADMITTED_JOB_BYTES: Final = TASK_BODY_BYTES + ITEM_OVERHEAD_BYTES
RESULT_BYTES: Final = 128 * 1024
GROWTH_BYTES: Final = 16 * 1024

MAX_MESSAGE_CHARS: Final = 1000
# A progress report is kept twice, on the job (its latest) and on its own event: clipped so the
# event's item, with its callback, stays within one write unit (1 KB).
MAX_PROGRESS_STAGE_BYTES: Final = 100
MAX_PROGRESS_MESSAGE_BYTES: Final = 500


def admitted_job_size(record: JobRecord) -> int:
    """The bytes the job item takes as admission writes it."""
    return item_size(record_to_item(record))


def unstorable_number(record: JobRecord) -> str | None:
    """Why DynamoDB would refuse a number of the job item, or None when it stores them all."""
    return first_number_refusal(record_to_item(record))


def result_size(result: Mapping[str, Any]) -> int:
    """The bytes a `result` attribute holding a map of the result would take (what the result's
    budget counts; its compressed JSON takes less but for a tiny result)."""
    return attribute_size("result", to_attribute(result))


def result_fits(result: Mapping[str, Any]) -> bool:
    return result_size(result) <= RESULT_BYTES


def clip(text: str | None, limit: int = MAX_MESSAGE_CHARS) -> str | None:
    """A message as the job item keeps it: at most `limit` characters."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def clip_bytes(text: str | None, limit: int) -> str | None:
    """`text` in at most `limit` UTF-8 bytes, cut between characters, "…" marking the cut."""
    if text is None or len(text.encode("utf-8")) <= limit:
        return text
    kept = text.encode("utf-8")[: limit - len("…".encode())]
    return kept.decode("utf-8", errors="ignore") + "…"
