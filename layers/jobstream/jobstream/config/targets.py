"""The targets file: the configured places job types run on.

A target's shared part (`id`, `enabled`, `job_types`, `timeout_ms`, `resource`, `max_attempts`)
is read here; everything else in its entry is its `settings`, which each job type it serves
validates with its own model (`JobType.settings_model`) when the file is read at start-up and on
every re-read.

The file's `resources` name the shared, rate-limited things targets run against (an account at a
source): at most `max_concurrent` jobs at once and `per_minute` source requests a minute, across
all workers (service/resources.py). A target names one with `resource`; a job type may give its
targets a built-in one (a `pixiv` target: `pixiv`, one at a time), which the file may redefine.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

_SHARED_FIELDS = frozenset({"id", "enabled", "job_types", "timeout_ms", "resource", "max_attempts"})
# A resource's name: in table keys, metric dimensions and log lines as written.
RESOURCE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
ResourceName = Annotated[StrictStr, Field(pattern=RESOURCE_NAME_PATTERN)]
DEFAULT_MAX_ATTEMPTS = 3


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Target(_Strict):
    id: Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"^\S(.*\S)?$")]
    enabled: StrictBool = True
    # The job types it serves; absent, every type that runs on targets.
    job_types: tuple[Annotated[StrictStr, Field(min_length=1)], ...] | None = None
    # The target's execution ceiling; a Task's deadline_ms can shorten it, never extend it.
    timeout_ms: Annotated[StrictInt, Field(ge=1000)] | None = None
    # The shared resource its jobs run against (the file's `resources`, or a built-in one).
    resource: ResourceName | None = None
    # How many times a job runs at most when its runs fail for a transient cause (a rate
    # limit, a 5xx, a network error, a worker that died): the first run included.
    max_attempts: Annotated[StrictInt, Field(ge=1, le=10)] = DEFAULT_MAX_ATTEMPTS
    # The rest of its entry, as written: what the job types it serves read (their own models).
    settings: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_settings(cls, entry: Any) -> Any:
        # The file keeps one flat object per target: its type-specific keys become `settings`.
        if not isinstance(entry, dict) or "settings" in entry:
            return entry
        shared = {key: value for key, value in entry.items() if key in _SHARED_FIELDS}
        settings = {key: value for key, value in entry.items() if key not in _SHARED_FIELDS}
        return {**shared, "settings": settings}

    def serves(self, job_type: str) -> bool:
        return self.job_types is None or job_type in self.job_types

    def ceiling_ms(self, default_deadline_ms: int) -> int:
        """How long its jobs may run at most: `timeout_ms`, else the default deadline."""
        return self.timeout_ms or default_deadline_ms


class ResourceLimits(_Strict):
    """What a shared resource allows at once and per minute."""

    max_concurrent: Annotated[StrictInt, Field(ge=1, le=500)]
    # Source requests started a minute, across all its jobs; absent, no pace.
    per_minute: Annotated[StrictInt, Field(ge=1, le=60_000)] | None = None

    @property
    def request_interval_ms(self) -> int | None:
        """The pace: one request every so many ms keeps to `per_minute` in any minute."""
        return None if self.per_minute is None else -(-60_000 // self.per_minute)


class TargetsFile(_Strict):
    """Enabled entries sharing an id make that id ambiguous (409), as in the reference."""

    account: Annotated[StrictStr, Field(min_length=1)] = "default"
    resources: dict[ResourceName, ResourceLimits] = Field(default_factory=dict)
    targets: list[Target]

    @property
    def enabled(self) -> list[Target]:
        return [target for target in self.targets if target.enabled]

    def enabled_for(self, job_type: str) -> list[Target]:
        """The enabled targets that serve `job_type`."""
        return [target for target in self.enabled if target.serves(job_type)]

    def longest_ceiling_ms(self, fallback_ms: int) -> int:
        """The largest execution ceiling among enabled targets (one without `timeout_ms` runs
        under `fallback_ms`), else `fallback_ms`: the capabilities' default deadline."""
        ceilings = [target.ceiling_ms(fallback_ms) for target in self.enabled]
        return max(ceilings, default=fallback_ms)
