"""Scheduled: the sweep. Returns what it did as counts."""

from __future__ import annotations

from jobstream.runtime import Runtime
from jobstream.schedule_handler import schedule_handler
from jobstream.service.sweep import sweep


def reconcile(rt: Runtime) -> dict[str, int | bool]:
    return sweep(rt).counts()


handler = schedule_handler(reconcile)
