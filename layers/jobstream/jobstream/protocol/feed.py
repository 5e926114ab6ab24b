"""The tenant's event feed (an extension of v1: `GET /events`, `POST /events/ack`): its opaque
cursor and its documents. Pure.

A cursor carries a place in the tenant's feed, sealed to the tenant (protocol/sealed.py): one
that was edited, or that another tenant was given, is refused (400 `invalid_params`), never read
as a place in this tenant's feed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from jobstream.protocol.errors import invalid_params
from jobstream.protocol.sealed import seal, unseal

# The place before every event: a reader that has seen nothing yet.
START: Final = ""


def encode_cursor(tenant: str, position: str) -> str:
    """The cursor of a place in the tenant's feed (`START`: before every event)."""
    return seal(tenant, position)


def decode_cursor(tenant: str, cursor: str, field: str = "after") -> str:
    """The place a cursor of this tenant's feed names; 400 for anything else."""
    position = unseal(tenant, cursor)
    if position is None:
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
