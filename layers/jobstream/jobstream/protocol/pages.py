"""Pages bounded by bytes as well as by count, so every answer fits in a Lambda response. Pure.

Lambda refuses a response larger than 6 MB (`MAX_RESPONSE_BYTES`); API Gateway then answers 500.
A page of jobs or events grows with what the jobs carry (labels up to 256 KiB, results up to
128 KiB: `store/budgets.py`), so a page holds documents while they fit in `MAX_PAGE_BYTES` and
says where the next page starts (`next_cursor`, `next_after`). The first document always goes
in: one job or one event takes at most ~3.4 MB (`tests/unit/test_pages.py` builds the largest).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

MAX_RESPONSE_BYTES: Final = 6 * 1024 * 1024
# What a page's documents may take; the rest is kept for the page's other fields and the
# response's own (status, headers).
MAX_PAGE_BYTES: Final = 5 * 1024 * 1024

Item = TypeVar("Item")


def response_bytes(document: Any) -> int:
    """The bytes `document` takes in the Lambda response that carries it. The body is compact
    JSON (`http/api.py`); the python3.11 runtime writes the whole response as JSON again with
    every non-ASCII character escaped, so the body's text is escaped a second time (an upper
    bound for the later runtimes, which keep non-ASCII characters as they are)."""
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return len(json.dumps(body)) - 2


def fill_page(
    items: Iterable[Item],
    render: Callable[[Item], dict[str, Any] | None],
    *,
    max_count: int | None = None,
    max_bytes: int = MAX_PAGE_BYTES,
) -> tuple[list[tuple[Item, dict[str, Any]]], bool]:
    """The documents of `items`, in order, while the page has room: at most `max_count`
    documents and `max_bytes` of response; the first document always goes in. An item rendered
    as None is not shown. The flag is True when an item was left out: the page must then say
    where the next one starts. Items are taken lazily: nothing after the first left out is read.
    """
    taken: list[tuple[Item, dict[str, Any]]] = []
    used = 0
    for item in items:
        if max_count is not None and len(taken) >= max_count:
            return taken, True
        document = render(item)
        if document is None:
            continue
        size = response_bytes(document) + 1  # and its comma
        if taken and used + size > max_bytes:
            return taken, True
        taken.append((item, document))
        used += size
    return taken, False
