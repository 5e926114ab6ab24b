"""Reading a queue message: what it names, or nothing, in which case it is dropped loudly."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")


def parse_or_drop(parse: Callable[[str], T], body: str, what: str) -> T | None:
    """What `body` names, or None (logged) when it names no `what`: nothing can ever process such
    a message, so it is dropped rather than retried."""
    try:
        return parse(body)
    except ValueError:
        logger.error("dropping a queue message that names no %s: %.200s", what, body)  # noqa: TRY400
        return None
