"""The targets file: which candidate searches this deployment can run."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

WorkType = Literal["illustration", "novel"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class TargetQuery(_Strict):
    tags: Annotated[list[Annotated[StrictStr, Field(min_length=1)]], Field(min_length=1)]
    expand: StrictBool = False


class Target(_Strict):
    id: Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"^\S(.*\S)?$")]
    enabled: StrictBool = True
    work_type: WorkType
    source: Literal["catalog", "pixiv"]
    query: TargetQuery
    limit: Annotated[StrictInt, Field(ge=1, le=100)] = 1
    scan_limit: Annotated[StrictInt, Field(ge=1, le=100)] = 30
    # The target's execution ceiling; a Task's deadline_ms can shorten it, never extend it.
    timeout_ms: Annotated[StrictInt, Field(ge=1000)] | None = None
    # Simulates a slow source (catalog only): a pause between works scanned.
    scan_delay_ms: Annotated[StrictInt, Field(ge=0, le=60_000)] = 0

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

    def longest_ceiling_ms(self, fallback_ms: int) -> int:
        """The largest execution ceiling among enabled targets (one without `timeout_ms` runs
        under `fallback_ms`), else `fallback_ms`: the capabilities' default deadline."""
        ceilings = [target.ceiling_ms(fallback_ms) for target in self.enabled]
        return max(ceilings, default=fallback_ms)
