"""candidate_search as a registered job type: find candidate works for a tag query."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from jobstream.jobtypes.base import JobRun, JobType, Outcome
from jobstream.jobtypes.candidate_search.params import parse_params
from jobstream.jobtypes.candidate_search.targets import admit_target
from jobstream.protocol.documents import FEATURES

if TYPE_CHECKING:
    from jobstream.jobtypes.candidate_search.sources.base import Source


def open_source(kind: str, scan_delay_ms: int = 0) -> Source:
    """The target's source. Imported on demand: each source pulls in its own client code."""
    if kind == "pixiv":
        from jobstream.jobtypes.candidate_search.sources.pixiv import (  # noqa: PLC0415
            PixivSource,
            refresh_token_from_environment,
        )

        return PixivSource(refresh_token_from_environment())
    from jobstream.jobtypes.candidate_search.sources.catalog import (  # noqa: PLC0415
        CatalogSource,
        catalog_path,
    )

    return CatalogSource(catalog_path(), scan_delay_ms=scan_delay_ms)


def run(job: JobRun) -> Outcome:
    from jobstream.jobtypes.candidate_search.executor import run as search  # noqa: PLC0415
    from jobstream.jobtypes.candidate_search.plan import build_plan  # noqa: PLC0415
    from jobstream.jobtypes.candidate_search.sources.base import SourceError  # noqa: PLC0415

    plan = build_plan(job.params, job.target)
    try:
        source = open_source(job.target.source, job.target.scan_delay_ms)
    except SourceError as error:
        return Outcome(reason=error.reason, message=error.message)
    return search(plan, source, job.context)


def _result_model() -> type[BaseModel]:
    from jobstream.protocol.models import ResultCandidateSearch  # noqa: PLC0415

    return ResultCandidateSearch


def _fit_result(result: dict[str, Any], fits: Any) -> dict[str, Any] | None:
    from jobstream.jobtypes.candidate_search.executor import fit_result  # noqa: PLC0415

    return fit_result(result, fits)


JOB_TYPE = JobType(
    name="candidate_search",
    home=Path(__file__).parent,
    description="Find candidate works for a tag query on a configured target.",
    parse_params=parse_params,
    select_target=admit_target,
    run=run,
    fit_result=_fit_result,
    result_model=_result_model,
    # Every feature the protocol names: exclusions, tag expansion and the target selector too.
    features=FEATURES,
)
