"""The search plan: a job's normalized params laid over its target's configured defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from jobstream.jobtypes.candidate_search.params import MAX_LIMIT, MAX_SCAN_LIMIT
from jobstream.jobtypes.candidate_search.settings import CandidateSearchSettings
from jobstream.jobtypes.sources.settings import SourceKind, WorkType


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """Everything one candidate_search run needs, decided before the source is asked anything."""

    source: SourceKind
    work_type: WorkType
    tags: tuple[str, ...]
    expand: bool  # True: a work matches on any tag (OR); False: on all of them (AND)
    limit: int
    scan_limit: int
    exclude_work_ids: frozenset[str] = frozenset()
    # Tags are compared case-insensitively, like the catalog's own tag match.
    exclude_tags: frozenset[str] = frozenset()
    exclude_candidate_ids: frozenset[str] = frozenset()
    work_types: tuple[str, ...] = ()

    def accepts_type(self, work_type: str) -> bool:
        """A work of another type than the one searched (or than the Task allows) is invalid."""
        return work_type == self.work_type and work_type in self.work_types


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def _dict(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def build_plan(params: dict[str, Any], settings: CandidateSearchSettings) -> SearchPlan:
    """Apply normalized params (see `protocol.task`) over the target's settings; params win."""
    query = _dict(params.get("query"))
    constraints = _dict(params.get("constraints"))
    if query.get("tags"):
        tags = tuple(str(tag) for tag in query["tags"])
        # Normalization keeps `expand` only when true, so a given query without it means AND.
        expand = query.get("expand") is True
    else:
        tags = tuple(settings.query.tags)
        expand = settings.query.expand
    limit = _clamp(int(constraints.get("limit") or settings.limit), 1, MAX_LIMIT)
    scan_limit = _clamp(
        int(constraints.get("scan_limit") or settings.scan_limit), limit, MAX_SCAN_LIMIT
    )
    excluded: dict[str, set[str]] = {"work": set(), "tag": set(), "candidate": set()}
    for item in constraints.get("exclude") or []:
        entry = _dict(item)
        kind, item_id = entry.get("kind"), entry.get("id")
        if kind in excluded and isinstance(item_id, str):
            excluded[kind].add(item_id.casefold() if kind == "tag" else item_id)
    # Admission guaranteed work_types (when given) includes the target's type.
    work_types = tuple(constraints.get("work_types") or (settings.work_type,))
    return SearchPlan(
        source=settings.source,
        work_type=settings.work_type,
        tags=tags,
        expand=expand,
        limit=limit,
        scan_limit=scan_limit,
        exclude_work_ids=frozenset(excluded["work"]),
        exclude_tags=frozenset(excluded["tag"]),
        exclude_candidate_ids=frozenset(excluded["candidate"]),
        work_types=work_types,
    )
