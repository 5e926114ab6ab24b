"""Hand-off: after a commit, send its callback intents to the queue (kept light: it is on
every write path)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from jobstream.service.runtime import Runtime
from jobstream.store.callbacks import IntentRef

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
