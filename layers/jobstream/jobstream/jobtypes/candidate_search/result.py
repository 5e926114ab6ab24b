"""The model every candidate_search result is checked against (the protocol's
`Result_CandidateSearch`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictStr

from jobstream.protocol.models import Asset, NonNegativeInt, ProtocolModel


class MatchedTag(ProtocolModel):
    tag: StrictStr
    source: Literal["seed", "related", "autocomplete", "tagged", "unknown"] | None = None
    weight: float | None = None


class Candidate(ProtocolModel):
    candidate_id: Annotated[StrictStr, Field(min_length=1)]
    platform: StrictStr
    work_id: StrictStr
    work_type: Literal["illustration", "novel", "unknown"]
    url: StrictStr | None = None
    tags: list[MatchedTag] | None = None
    assets: list[Asset] | None = None
    metadata: dict[str, Any] | None = None


class FilteredWork(ProtocolModel):
    work_id: StrictStr
    reason: Literal["duplicate", "excluded", "invalid", "unavailable", "other"]


class ResultCandidateSearch(ProtocolModel):
    candidates: list[Candidate]
    scanned: NonNegativeInt
    filtered: list[FilteredWork] | None = None
