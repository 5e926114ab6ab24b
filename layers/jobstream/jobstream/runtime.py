"""What every operation needs: settings, the store, the queue and a clock, built once."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from jobstream.alerts_topic import AlertTopic
from jobstream.clock import now_ms
from jobstream.config.registry import load_registry
from jobstream.config.settings import Settings, checked_targets, load_settings
from jobstream.config.targets import TargetsFile
from jobstream.config.tenants import TenantConfig, TenantRegistry
from jobstream.outbound.guard import Resolver, system_resolver
from jobstream.queue import CallbackQueue, WorkQueue
from jobstream.store.jobs import JobStore
from jobstream.store.ports import CallbackStorePort, EndpointStorePort, JobStorePort

if TYPE_CHECKING:
    from jobstream.delivery.http import HttpResult
    from jobstream.outbound.guard import PinnedTarget as CallbackTarget

Poster = Callable[["CallbackTarget", bytes, Mapping[str, str], float], "HttpResult"]


def post_callback(
    target: CallbackTarget, body: bytes, headers: Mapping[str, str], timeout_s: float
) -> HttpResult:
    # Imported on first use: http.client and ssl are needed only where callbacks are sent.
    from jobstream.delivery import http  # noqa: PLC0415

    return http.post_callback(target, body, headers, timeout_s)


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    store: JobStorePort
    clock: Callable[[], int] = now_ms
    # How a run waits (a retry's backoff, a resource's turn); tests advance their clock instead.
    sleep: Callable[[float], None] = time.sleep
    # Injectable for tests: the queue client, the HTTP poster and DNS.
    queue: CallbackQueue | None = None
    work: WorkQueue | None = None
    poster: Poster = post_callback
    resolver: Resolver = system_resolver
    alerts: AlertTopic | None = None

    def targets(self) -> TargetsFile:
        """The targets file as it is now (re-read when it changes, and checked again)."""
        return checked_targets(self.settings)

    def tenants(self) -> TenantRegistry:
        """The consumer registry as it is now (re-read on change or after its cache age)."""
        return load_registry(self.settings, self.clock())

    def tenant(self, name: str) -> TenantConfig | None:
        """One tenant's configuration now; None once it has been removed."""
        return self.tenants().get(name)

    @property
    def callbacks(self) -> CallbackStorePort:
        return self.store.callbacks()

    @property
    def endpoints(self) -> EndpointStorePort:
        return self.store.endpoints()

    @property
    def callback_queue(self) -> CallbackQueue:
        if self.queue is not None:
            return self.queue
        return CallbackQueue(
            self.settings.callback_queue_url, self.settings.callback_dead_letter_url
        )

    @property
    def alert_topic(self) -> AlertTopic:
        """The operator's alert topic (none set: publishing does nothing)."""
        if self.alerts is not None:
            return self.alerts
        return AlertTopic(self.settings.endpoint_alerts_topic_arn)

    @property
    def work_queue(self) -> WorkQueue:
        return self.work if self.work is not None else WorkQueue(self.settings.work_queue_url)


@cache
def runtime() -> Runtime:
    """The process-wide runtime; invalid configuration raises here, at start-up."""
    settings = load_settings()
    store = JobStore(settings.table_name, previous_formats=settings.write_previous_formats)
    return Runtime(settings=settings, store=store)
