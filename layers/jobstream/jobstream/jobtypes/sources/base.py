"""The source interface: what the job types read works and their assets through."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from jobstream.jobtypes.base import Outcome

WorkType = Literal["illustration", "novel"]


@dataclass(frozen=True, slots=True)
class SourceAsset:
    asset_id: str
    type: Literal["image", "novel", "metadata", "cover"]
    role: Literal["primary", "cover", "preview"]
    url: str
    width: int | None = None
    height: int | None = None
    mime: str | None = None
    # The catalog's local copy of the file (a path relative to the catalog): what a download reads.
    file: str | None = None


@dataclass(frozen=True, slots=True)
class Work:
    """One work as a source returns it."""

    work_id: str
    work_type: WorkType
    title: str
    tags: tuple[str, ...]
    url: str
    author: str
    bookmarks: int = 0
    assets: tuple[SourceAsset, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """What to ask a source for: tags (all of them, or any with `match_any`), newest first."""

    tags: tuple[str, ...]
    match_any: bool
    work_type: WorkType
    scan_limit: int


class SourceError(Exception):
    """A source failure, with the internal reason it maps to (rate_limited, auth_failed,
    remote_http_error, network_error, metadata_failed, ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def outcome(self) -> Outcome:
        """How the job ends when this failure stops it."""
        return Outcome(reason=self.reason, message=self.message)


class Source(Protocol):
    def search(self, request: SearchRequest) -> Iterator[Work]:
        """Works matching the request, at most `scan_limit`; raises SourceError."""
        ...
