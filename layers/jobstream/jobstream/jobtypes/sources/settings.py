"""What a target says of the source its jobs read: the settings the job types reading works
share (each type's own model extends or reuses it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

WorkType = Literal["illustration", "novel"]
SourceKind = Literal["catalog", "pixiv"]


class SourceSettings(BaseModel):
    """A target's source and the kind of work it holds."""

    # Keys this model does not name belong to another job type's settings of the same target.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, defer_build=True)

    work_type: WorkType
    source: SourceKind
