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


def hand_off(rt: Runtime, refs: Sequence[IntentRef], tenant: str | None = None) -> None:
    """Send committed intents to the callback queue, in `tenant`'s message group when it is
    known. A failure here loses nothing: each intent stays due in the sweep index and the next
    sweep sends it."""
    tenants = [tenant] * len(refs)
    _send_or_leave_to_sweep(
        lambda items: rt.callback_queue.send(items, tenants), refs, "callback hand-off"
    )


def dispatch(rt: Runtime, jobs: Sequence[JobDispatch]) -> None:
    """Send admitted jobs to the work queue; a lost send is re-sent by the sweep."""
    _send_or_leave_to_sweep(rt.work_queue.send, jobs, "job dispatch")


def _send_or_leave_to_sweep(
    send: Callable[[Sequence[T]], int], items: Sequence[T], what: str
) -> None:
    if not items:
        return
    try:
        send(items)
    except Exception:
        logger.exception("%s failed; the sweep will send it", what)
