"""Hand-off after a commit: callback intents to the callback queue, new jobs to the work queue.

Kept light: it is on every write path. A failed send loses nothing; the sweep repairs it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from jobstream.domain import IntentRef
from jobstream.service.runtime import Runtime

logger = logging.getLogger("jobstream.callbacks")


def hand_off(rt: Runtime, refs: Sequence[IntentRef]) -> None:
    """Send committed intents to the callback queue. A failure here loses nothing: each intent
    stays due in the sweep index and the next sweep sends it."""
    if not refs:
        return
    try:
        rt.callback_queue.send(refs)
    except Exception:
        logger.exception("callback hand-off failed; the sweep will send it")


def dispatch(rt: Runtime, job_ids: Sequence[str]) -> None:
    """Send admitted jobs to the work queue; a lost send is re-sent by the sweep."""
    if not job_ids:
        return
    try:
        rt.work_queue.send(job_ids)
    except Exception:
        logger.exception("job dispatch failed; the sweep will send it")
