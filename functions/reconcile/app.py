"""Scheduled: the sweep. Returns what it did as counts."""

from __future__ import annotations

from typing import Any

from jobstream import runtime as runtime_module
from jobstream.observability import instrument
from jobstream.service.sweep import sweep


@instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, int | bool]:
    return sweep(runtime_module.runtime()).counts()
