"""What a target says of the source its jobs read: the settings the job types reading works
share (each type's own model extends or reuses it)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from jobstream.jobtypes.sources.api_host import parse_api_host

WorkType = Literal["illustration", "novel"]
SourceKind = Literal["catalog", "pixiv"]


class SourceSettings(BaseModel):
    """A target's source and the kind of work it holds."""

    # Keys this model does not name belong to another job type's settings of the same target.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True, defer_build=True)

    work_type: WorkType
    source: SourceKind
    # A proxy or mirror of Pixiv's app API (pixiv only): its token refresh and API calls go
    # there. None: Pixiv's own hosts.
    api_host: str | None = None

    @field_validator("api_host")
    @classmethod
    def _exact_origin(cls, value: str | None) -> str | None:
        return None if value is None else parse_api_host(value)

    @model_validator(mode="after")
    def _api_host_for_pixiv_only(self) -> Self:
        # A catalog target reads a local file: an api_host there is a mistake, not a no-op.
        if self.api_host is not None and self.source != "pixiv":
            raise ValueError(f"api_host is a setting of a pixiv target, not of a {self.source} one")
        return self
