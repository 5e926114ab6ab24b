"""The tenant's event feed (an extension of v1: `GET /events`, `POST /events/ack`): its opaque
cursor and its documents. Pure.

A cursor carries a place in the tenant's feed and a check bound to the tenant: a cursor that was
edited, or that another tenant was given, is refused (400 `invalid_params`), never read as a
place in this tenant's feed. The check is not a secret: a cursor gives no access (every read is
of the caller's own feed); it only keeps a wrong cursor from silently skipping or replaying.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from typing import Any, Final

from jobstream.protocol.errors import invalid_params

# The place before every event: a reader that has seen nothing yet.
START: Final = ""
_CHECK_BYTES: Final = 8
_SEPARATOR: Final = "|"


def _check(tenant: str, position: str) -> str:
    digest = hashlib.sha256(f"{tenant}\n{position}".encode()).digest()
    return digest[:_CHECK_BYTES].hex()


def encode_cursor(tenant: str, position: str) -> str:
    """The cursor of a place in the tenant's feed (`START`: before every event)."""
    raw = f"{position}{_SEPARATOR}{_check(tenant, position)}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(tenant: str, cursor: str, field: str = "after") -> str:
    """The place a cursor of this tenant's feed names; 400 for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, binascii.Error):
        raw = ""
    position, separator, check = raw.rpartition(_SEPARATOR)
    if not separator or check != _check(tenant, position):
        raise invalid_params(
            f"{field} must be a cursor this API returned for this consumer's feed",
            detail={"field": field},
        )
    return position


def feed_page(
    events: Sequence[dict[str, Any]],
    *,
    next_after: str,
    has_more: bool,
    now: int,
    consumer: str | None = None,
) -> dict[str, Any]:
    """A FeedPage: the events (each as its job's page shows it), the cursor after the last one
    (after the page's place when it has none), and whether more are there already."""
    page: dict[str, Any] = {"events": list(events), "next_after": next_after, "has_more": has_more}
    if consumer is not None:
        page["consumer"] = consumer
    page["server_time"] = now
    return page


def feed_ack_result(consumer: str, through: str, now: int) -> dict[str, Any]:
    """Where a named cursor stands after an ack (further than asked, when it already was)."""
    return {"consumer": consumer, "through": through, "server_time": now}
