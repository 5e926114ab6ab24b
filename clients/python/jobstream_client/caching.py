"""Reusing the capabilities document: kept with its ETag for its `max-age`, then revalidated
with `If-None-Match` (a 304 keeps it another `max-age`). Each client has its own cache unless
given one: a consumer that builds a fresh client per call shares one, and so asks once a
`max-age`, then only revalidates."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

_MAX_AGE: Final = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?\s*(?:,|$)", re.IGNORECASE)
# Directives after which a stored answer must not be reused without asking (or kept at all).
_NOT_REUSABLE: Final = frozenset({"no-store", "no-cache"})


@dataclass(frozen=True, slots=True)
class Stored:
    """A document, its validator and until when (the client's clock, seconds) it is fresh."""

    document: Mapping[str, Any]
    etag: str
    fresh_until_s: float

    def fresh(self, now_s: float) -> bool:
        return now_s < self.fresh_until_s


def fresh_for_s(cache_control: str | None) -> float | None:
    """Seconds an answer may be reused without asking: its `max-age`; None when it must not be
    stored (`no-store`), 0 when it must be revalidated every time (`no-cache`, no max-age)."""
    directives = {
        part.split("=", 1)[0].strip().lower() for part in (cache_control or "").split(",")
    }
    if "no-store" in directives:
        return None
    if directives & _NOT_REUSABLE:
        return 0.0
    found = _MAX_AGE.search(cache_control or "")
    return float(found.group(1)) if found else 0.0


class CapabilitiesCache:
    """Capabilities documents by (producer, token): one tenant's never answers another's."""

    def __init__(self) -> None:
        self._stored: dict[tuple[str, str], Stored] = {}
        self._lock = threading.Lock()

    def get(self, base_url: str, token: str) -> Stored | None:
        with self._lock:
            return self._stored.get((base_url, token))

    def put(self, base_url: str, token: str, stored: Stored) -> None:
        with self._lock:
            self._stored[(base_url, token)] = stored

    def forget(self, base_url: str, token: str) -> None:
        with self._lock:
            self._stored.pop((base_url, token), None)
