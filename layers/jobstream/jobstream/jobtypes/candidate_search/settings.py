"""What a target says to candidate_search: its source and work type, its default query and
sizes, validated when the targets file is read (strict: an unknown key stops start-up)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from jobstream.config.targets import Target
from jobstream.jobtypes.sources.settings import SourceSettings


class TargetQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    tags: Annotated[list[Annotated[StrictStr, Field(min_length=1)]], Field(min_length=1)]
    expand: StrictBool = False


class CandidateSearchSettings(SourceSettings):
    model_config = ConfigDict(extra="forbid")

    query: TargetQuery
    limit: Annotated[StrictInt, Field(ge=1, le=100)] = 1
    scan_limit: Annotated[StrictInt, Field(ge=1, le=100)] = 30
    # Simulates a slow source (catalog only): a pause between works scanned.
    scan_delay_ms: Annotated[StrictInt, Field(ge=0, le=60_000)] = 0


def search_settings(target: Target) -> CandidateSearchSettings:
    """The target's candidate_search settings (checked at start-up, so valid here)."""
    return CandidateSearchSettings.model_validate(target.settings)
