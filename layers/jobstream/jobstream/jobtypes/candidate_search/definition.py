"""candidate_search as a registered job type: find candidate works for a tag query."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from jobstream.jobtypes import (
    JobRun,
    JobType,
    Outcome,
    ParsedParams,
    ResultFits,
    ResultSummary,
    Target,
    TargetsFile,
)
from jobstream.jobtypes.candidate_search.params import (
    MAX_EXCLUDES,
    MAX_LIMIT,
    MAX_SCAN_LIMIT,
    MAX_TAGS,
    parse_params,
)
from jobstream.jobtypes.candidate_search.settings import CandidateSearchSettings, search_settings
from jobstream.jobtypes.candidate_search.targets import admit_target
from jobstream.jobtypes.sources.resources import SOURCE_RESOURCES, source_resource
from jobstream.protocol.documents import FEATURES

if TYPE_CHECKING:
    from jobstream.jobtypes.sources.base import Source


def open_source(settings: CandidateSearchSettings, before_request: Callable[[], None]) -> Source:
    """The target's source, calling `before_request` (the job's resource gate) before each of
    its requests. Imported on demand: each source pulls in its own client code."""
    if settings.source == "pixiv":
        from jobstream.jobtypes.sources.pixiv import (  # noqa: PLC0415
            PixivSource,
            refresh_token_from_environment,
        )

        return PixivSource(
            refresh_token_from_environment(),
            api_host=settings.api_host,
            before_request=before_request,
        )
    from jobstream.jobtypes.sources.catalog import (  # noqa: PLC0415
        CatalogSource,
        catalog_path,
    )

    return CatalogSource(
        catalog_path(), scan_delay_ms=settings.scan_delay_ms, before_request=before_request
    )


class CandidateSearch(JobType):
    """Find candidate works for a tag query on a configured target."""

    name = "candidate_search"
    stages = ("searching", "ranking")
    empty_result = MappingProxyType({"candidates": [], "scanned": 0})
    settings_model = CandidateSearchSettings
    builtin_resources = SOURCE_RESOURCES
    # Every feature the protocol names: exclusions, tag expansion and the target selector too.
    features = FEATURES
    limits = MappingProxyType(
        {
            "max_tags": MAX_TAGS,
            "max_excludes": MAX_EXCLUDES,
            "max_candidates_per_job": MAX_LIMIT,
            "max_scan_limit": MAX_SCAN_LIMIT,
        }
    )

    def default_resource(self, target: Target) -> str | None:
        return source_resource(target)

    def parse_params(self, params: Any) -> ParsedParams:
        return parse_params(params)

    def select_target(self, params: ParsedParams, targets: TargetsFile) -> Target:
        return admit_target(params, targets, self.name)

    def run(self, job: JobRun) -> Outcome:
        from jobstream.jobtypes.candidate_search.executor import run as search  # noqa: PLC0415
        from jobstream.jobtypes.candidate_search.plan import build_plan  # noqa: PLC0415
        from jobstream.jobtypes.sources.base import SourceError  # noqa: PLC0415

        if job.target is None:
            raise TypeError("a candidate_search job runs on a target")
        settings = search_settings(job.target)
        plan = build_plan(job.params, settings)
        try:
            source = open_source(settings, job.context.before_source_request)
        except SourceError as error:
            return error.outcome()
        return search(plan, source, job.context)

    def result_model(self) -> type[BaseModel]:
        from jobstream.jobtypes.candidate_search.result import (  # noqa: PLC0415
            ResultCandidateSearch,
        )

        return ResultCandidateSearch

    def fit_result(self, result: dict[str, Any], fits: ResultFits) -> dict[str, Any] | None:
        from jobstream.jobtypes.candidate_search.executor import fit_result  # noqa: PLC0415

        return fit_result(result, fits)

    def summarize_result(self, result: Mapping[str, Any]) -> ResultSummary:
        candidates = result.get("candidates") or []
        headline = f"{len(candidates)} candidate(s)"
        if result.get("scanned") is not None:
            headline += f", {result['scanned']} scanned"
        if result.get("filtered"):
            headline += f", {len(result['filtered'])} filtered"
        urls = tuple(str(found["url"]) for found in candidates if found.get("url"))
        return ResultSummary(headline, urls)


JOB_TYPE = CandidateSearch()
