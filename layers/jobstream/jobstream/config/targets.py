"""The targets file: the configured places job types run on.

A target's shared part (`id`, `enabled`, `job_types`, `timeout_ms`) is read here; everything
else in its entry is its `settings`, which each job type it serves validates with its own model
(`JobType.settings_model`) when the file is read at start-up and on every re-read.
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

_SHARED_FIELDS = frozenset({"id", "enabled", "job_types", "timeout_ms"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Target(_Strict):
    id: Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"^\S(.*\S)?$")]
    enabled: StrictBool = True
    # The job types it serves; absent, every type that runs on targets.
    job_types: tuple[Annotated[StrictStr, Field(min_length=1)], ...] | None = None
    # The target's execution ceiling; a Task's deadline_ms can shorten it, never extend it.
    timeout_ms: Annotated[StrictInt, Field(ge=1000)] | None = None
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


class TargetsFile(_Strict):
    """Enabled entries sharing an id make that id ambiguous (409), as in the reference."""

    account: Annotated[StrictStr, Field(min_length=1)] = "default"
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
