"""asset_fetch as a registered job type: download a candidate's assets into the asset bucket."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from jobstream.jobtypes.asset_fetch.params import MAX_ASSETS, parse_params
from jobstream.jobtypes.base import JobRun, JobType, Outcome
from jobstream.jobtypes.targeting import resolve_target


def _result_model() -> type[BaseModel]:
    from jobstream.jobtypes.asset_fetch.result import ResultAssetFetch  # noqa: PLC0415

    return ResultAssetFetch


def run(job: JobRun) -> Outcome:
    from jobstream.jobtypes.asset_fetch.config import load_config  # noqa: PLC0415
    from jobstream.jobtypes.asset_fetch.executor import run as fetch_all  # noqa: PLC0415
    from jobstream.jobtypes.asset_fetch.sources import open_asset_source  # noqa: PLC0415
    from jobstream.jobtypes.asset_fetch.storage import S3AssetStore  # noqa: PLC0415
    from jobstream.jobtypes.candidate_search.sources.base import SourceError  # noqa: PLC0415

    try:
        config = load_config()
        source = open_asset_source(job.target, config)
    except SourceError as error:
        return Outcome(reason=error.reason, message=error.message)
    # Wall-clock time: S3 judges a presigned URL's expiry by it.
    now_ms = int(time.time() * 1000)
    return fetch_all(job, source, S3AssetStore(config.bucket), config, now_ms)


JOB_TYPE = JobType(
    name="asset_fetch",
    home=Path(__file__).parent,
    description="Download the assets a candidate names into jobstream's asset bucket.",
    parse_params=parse_params,
    select_target=resolve_target,
    run=run,
    result_model=_result_model,
    features=("events", "progress", "cancel", "idempotency", "target_selector"),
    limits={"max_assets": MAX_ASSETS},
)
