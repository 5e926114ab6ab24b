"""asset_fetch as a registered job type: download a candidate's assets into the asset bucket."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StrictStr

from jobstream.jobtypes.asset_fetch.params import MAX_ASSETS, parse_params
from jobstream.jobtypes.base import JobRun, JobType, Outcome
from jobstream.protocol.models import Asset, NonNegativeInt, ProtocolModel
from jobstream.protocol.targeting import resolve_target

NAME = "asset_fetch"
SCHEMAS: dict[str, dict[str, Any]] = json.loads(
    Path(__file__).with_name("schema.json").read_text(encoding="utf-8")
)


class FetchedAsset(Asset):
    mime: StrictStr
    bytes: NonNegativeInt
    hash: Annotated[StrictStr, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class ResultAssetFetch(ProtocolModel):
    assets: Annotated[list[FetchedAsset], Field(min_length=1)]
    expires_at: NonNegativeInt
    work_id: StrictStr | None = None


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
    name=NAME,
    description="Download the assets a candidate names into jobstream's asset bucket.",
    parse_params=parse_params,
    select_target=resolve_target,
    run=run,
    result_model=ResultAssetFetch,
    params_def="AssetFetchParams",
    result_def="Result_AssetFetch",
    schemas=SCHEMAS,
    features=("events", "progress", "cancel", "idempotency", "target_selector"),
    limits={"max_assets": MAX_ASSETS},
)
