"""The source interface: what the job types read works and their assets through."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jobstream.errors import JobstreamError
from jobstream.jobtypes.base import Outcome
from jobstream.jobtypes.sources.settings import WorkType
from jobstream.protocol.assets import AssetRole, AssetType
from jobstream.protocol.errors import Reason
from jobstream.protocol.models import NonNegativeInt


class _SourceValue(BaseModel):
    # Validated once where a source builds it (a malformed Pixiv item, a typo in a hand-edited
    # catalog: never a silently dropped field); frozen after that.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class SourceAsset(_SourceValue):
    # Ids and URLs may be empty here: what a job type does with such a work or asset is its own
    # rule (the reference producer filters the work as invalid and drops the asset).
    asset_id: str
    type: AssetType
    role: AssetRole
    url: str
    # The catalog's local copy of the file (a path relative to the catalog): what a download reads.
    file: Annotated[str, Field(min_length=1)] | None = None
    width: NonNegativeInt | None = None
    height: NonNegativeInt | None = None
    mime: str | None = None


class Work(_SourceValue):
    """One work as a source returns it."""

    work_id: str
    work_type: WorkType
    title: str
    tags: tuple[str, ...]
    url: str
    author: str
    bookmarks: NonNegativeInt = 0
    assets: tuple[SourceAsset, ...] = ()
    extra: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """What to ask a source for: tags (all of them, or any with `match_any`), newest first."""

    tags: tuple[str, ...]
    match_any: bool
    work_type: WorkType
    scan_limit: int


class SourceError(JobstreamError):
    """A source failure, with the internal reason the job ends with (rate_limited, auth_failed,
    remote_http_error, network_error, metadata_failed, ...) and the wait the source asked for
    before the next request (its Retry-After, in milliseconds), when it said."""

    def __init__(
        self,
        reason: Reason,
        message: str,
        *,
        retry_after_ms: int | None = None,
        status: int | None = None,
        passing: bool = False,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after_ms = retry_after_ms
        # The HTTP status that failed, when one did: a 4xx other than 429 no retry cures.
        self.status = status
        # A cause another run may cure whatever the reason says (our own store was unreadable
        # for a moment while the source's credential was read).
        self.passing = passing

    @property
    def transient(self) -> bool | None:
        """False for an answer another run would get again (a 4xx that is no rate limit: Pixiv
        says "Rate Limit" with a 403 too); None: the reason decides (`Outcome.retryable`)."""
        if self.passing:
            return True
        limited = self.reason is Reason.RATE_LIMITED or self.status == 429
        if not limited and self.status is not None and 400 <= self.status < 500:
            return False
        return None

    def outcome(self) -> Outcome:
        """How the job's run ends when this failure stops it."""
        return Outcome(
            reason=self.reason,
            message=self.message,
            retry_after_ms=self.retry_after_ms,
            transient=self.transient,
        )


def ungated() -> None:
    """The request gate of a source no job paces (a test, a one-off call): never waits."""


class Source(Protocol):
    def search(self, request: SearchRequest) -> Iterator[Work]:
        """Works matching the request, at most `scan_limit`; raises SourceError."""
        ...
