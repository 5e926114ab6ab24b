"""What every operation needs: settings, the store and a clock, built once per process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from jobstream.clock import now_ms
from jobstream.config.settings import Settings, load_settings, load_targets
from jobstream.config.targets import TargetsFile
from jobstream.store.jobs import JobStore


@dataclass(frozen=True, slots=True)
class Runtime:
    settings: Settings
    store: JobStore
    clock: Callable[[], int] = now_ms

    def targets(self) -> TargetsFile:
        """The targets file as it is now (re-read when it changes)."""
        return load_targets(self.settings.targets_path)


@cache
def runtime() -> Runtime:
    """The process-wide runtime; invalid configuration raises here, at start-up."""
    settings = load_settings()
    return Runtime(settings=settings, store=JobStore(settings.table_name))
