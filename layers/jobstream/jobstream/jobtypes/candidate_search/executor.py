"""Run one candidate_search: ask the source, filter what it returns, build the protocol result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from jobstream.jobtypes.base import Outcome
from jobstream.jobtypes.candidate_search.plan import SearchPlan
from jobstream.jobtypes.context import ExecutionContext
from jobstream.jobtypes.sources.base import (
    SearchRequest,
    Source,
    SourceAsset,
    SourceError,
    Work,
)
from jobstream.protocol.errors import Reason

PLATFORM: Final = "pixiv"
PROGRESS_EVERY: Final = 10
SEED_WEIGHT: Final = 1.0
RELATED_WEIGHT: Final = 0.5

FilterReason = Literal["excluded", "duplicate", "invalid"]


def candidate_id(work_id: str) -> str:
    """Stable across runs, so a consumer can exclude a candidate it has already seen."""
    return f"{PLATFORM}:{work_id}"


def run(plan: SearchPlan, source: Source, context: ExecutionContext) -> Outcome:
    """Search, filter and rank; JobInterruptedError from `context.checkpoint()` propagates."""
    context.progress("searching", f"searching {len(plan.tags)} tag(s)")
    request = SearchRequest(
        tags=plan.tags, match_any=plan.expand, work_type=plan.work_type, scan_limit=plan.scan_limit
    )
    candidates: list[dict[str, Any]] = []
    filtered: list[dict[str, str]] = []
    seen: set[str] = set()
    scanned = 0
    try:
        for work in source.search(request):
            # Before each work, so a cancel or a lost lease stops a slow source promptly.
            context.checkpoint()
            scanned += 1
            reason = _filter_reason(plan, work, seen)
            seen.add(work.work_id)
            if reason is None:
                candidates.append(_candidate(plan, work))
            else:
                filtered.append({"work_id": work.work_id, "reason": reason})
            if scanned % PROGRESS_EVERY == 0:
                context.progress(
                    "searching", f"scanned {scanned} works, {len(candidates)} candidates"
                )
            # The source may yield up to scan_limit; never trust it to stop on its own.
            if len(candidates) >= plan.limit or scanned >= plan.scan_limit:
                break
    except SourceError as error:
        return error.outcome()
    if not candidates:
        return _empty_outcome(scanned, filtered)
    context.progress("ranking")
    # Source order (newest first) is the ranking; choosing among candidates is the consumer's job.
    return Outcome(result={"candidates": candidates, "scanned": scanned, "filtered": filtered})


def fit_result(
    result: dict[str, Any], fits: Callable[[dict[str, Any]], bool]
) -> dict[str, Any] | None:
    """The result cut to what `fits` (the job item's result budget): its best candidates (source
    order is the ranking) while they fit, each one left out listed in `filtered` with reason
    `other`. None when not even the best candidate fits alone: the job fails instead."""
    if fits(result):
        return result
    candidates: list[dict[str, Any]] = list(result.get("candidates") or [])
    filtered: list[dict[str, Any]] = list(result.get("filtered") or [])

    def keeping(count: int) -> dict[str, Any]:
        left_out = [
            {"work_id": str(candidate.get("work_id", "")), "reason": "other"}
            for candidate in candidates[count:]
        ]
        return {**result, "candidates": candidates[:count], "filtered": filtered + left_out}

    if not candidates or not fits(keeping(1)):
        return None
    # Keeping one more candidate only grows the result (a candidate holds its work_id and more
    # than the `filtered` entry it replaces), so the largest count that fits is found by halving.
    fitting, too_many = 1, len(candidates)
    while too_many - fitting > 1:
        middle = (fitting + too_many) // 2
        if fits(keeping(middle)):
            fitting = middle
        else:
            too_many = middle
    return keeping(fitting)


def _filter_reason(plan: SearchPlan, work: Work, seen: set[str]) -> FilterReason | None:
    if work.work_id in seen:
        return "duplicate"
    if not work.work_id or not work.url or not plan.accepts_type(work.work_type):
        return "invalid"
    if (
        work.work_id in plan.exclude_work_ids
        or candidate_id(work.work_id) in plan.exclude_candidate_ids
        or any(tag.casefold() in plan.exclude_tags for tag in work.tags)
    ):
        return "excluded"
    return None


def _empty_outcome(scanned: int, filtered: list[dict[str, str]]) -> Outcome:
    if scanned == 0:
        return Outcome(reason=Reason.NO_CANDIDATE, message="no work matched the query")
    if all(item["reason"] == "duplicate" for item in filtered):
        return Outcome(
            reason=Reason.DUPLICATE_EXHAUSTED,
            message=f"all {scanned} works found were duplicates",
        )
    return Outcome(
        reason=Reason.FILTER_EXHAUSTED,
        message=f"all {scanned} works found were filtered out (excluded, invalid or duplicate)",
    )


def matched_tags(query_tags: tuple[str, ...], work_tags: tuple[str, ...]) -> list[dict[str, Any]]:
    """The work's tags that explain the match: equal to a query tag (seed) or containing one."""
    wanted = [tag.casefold() for tag in query_tags]
    matched: list[dict[str, Any]] = []
    for tag in work_tags:
        folded = tag.casefold()
        if folded in wanted:
            matched.append({"tag": tag, "source": "seed", "weight": SEED_WEIGHT})
        elif any(query in folded for query in wanted):
            matched.append({"tag": tag, "source": "related", "weight": RELATED_WEIGHT})
    return matched


def _asset(asset: SourceAsset) -> dict[str, Any]:
    document: dict[str, Any] = {
        "asset_id": asset.asset_id,
        "type": asset.type,
        "role": asset.role,
        "source": PLATFORM,
        # Files served by the platform as-is; nothing here is author-supplied art.
        "quality": "default",
        "locator": {"kind": "url", "value": asset.url},
    }
    if asset.width is not None:
        document["width"] = asset.width
    if asset.height is not None:
        document["height"] = asset.height
    if asset.mime is not None:
        document["mime"] = asset.mime
    return document


def _candidate(plan: SearchPlan, work: Work) -> dict[str, Any]:
    return {
        "candidate_id": candidate_id(work.work_id),
        "platform": PLATFORM,
        "work_id": work.work_id,
        "work_type": work.work_type,
        "url": work.url,
        "tags": matched_tags(plan.tags, work.tags),
        "assets": [_asset(asset) for asset in work.assets if asset.asset_id and asset.url],
        "metadata": {"title": work.title, "author": work.author, "bookmarks": work.bookmarks},
    }
