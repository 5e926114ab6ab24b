"""Hand-off after a commit: callback intents to the callback queue, new jobs to the work queue.

Kept light: it is on every write path. A failed send loses nothing; the sweep repairs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from jobstream.domain import IntentRef
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime

logger = logging.getLogger(__name__)
T = TypeVar("T")


def hand_off(rt: Runtime, refs: Sequence[IntentRef], tenant: str | None = None) -> bool:
    """Send committed intents to the callback queue, in `tenant`'s message group when it is
    known; whether the queue took every one (`_sent`). A failure here loses nothing: each
    intent stays due in the sweep index and the next sweep sends it."""
    tenants = [tenant] * len(refs)
    queue = rt.callback_queue
    return _sent(
        getattr(queue, "url", True),
        lambda items: queue.send(items, tenants),
        refs,
        "callback hand-off",
    )


def dispatch(rt: Runtime, jobs: Sequence[JobDispatch]) -> bool:
    """Send admitted jobs to the work queue; whether the queue took every one (`_sent`). A
    lost send is re-sent by the sweep."""
    queue = rt.work_queue
    return _sent(getattr(queue, "url", True), queue.send, jobs, "job dispatch")


def _sent(url: object, send: Callable[[Sequence[T]], int], items: Sequence[T], what: str) -> bool:
    """Send `items`; False when the send raised or SQS listed some as `Failed` (it answers
    those without an error: only the count it took tells), so that a caller that records the
    send records only one that happened. A queue without a URL (a deployment or test without
    it) takes nothing and is owed nothing: True."""
    if not items or not url:
        return True
    try:
        accepted = send(items)
    except Exception:
        logger.exception("%s failed; the sweep will send it", what)
        return False
    if accepted < len(items):
        logger.warning(
            "%s failed; the sweep will send it",
            what,
            extra={"accepted": accepted, "sent": len(items)},
        )
        return False
    return True
