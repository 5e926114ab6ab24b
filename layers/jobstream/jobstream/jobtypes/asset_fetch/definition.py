"""asset_fetch as a registered job type: download a candidate's assets into the asset bucket."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from jobstream.jobtypes import JobRun, JobType, Outcome, ParsedParams, ResultSummary, Target
from jobstream.jobtypes.asset_fetch.params import MAX_ASSETS, parse_params
from jobstream.jobtypes.sources.resources import SOURCE_RESOURCES, source_resource
from jobstream.jobtypes.sources.settings import SourceSettings


class AssetFetch(JobType):
    """Download the assets a candidate names into jobstream's asset bucket."""

    name = "asset_fetch"
    # A claimed job shows "searching" until its first asset, as every type did before types
    # named their stages: the documents consumers already read stay as they were.
    stages = ("searching", "fetching", "stored")
    empty_result = MappingProxyType({"assets": []})
    # It reads the source of a target: only the source settings every such type shares.
    settings_model = SourceSettings
    builtin_resources = SOURCE_RESOURCES
    features = ("events", "progress", "cancel", "idempotency", "target_selector")
    limits = MappingProxyType({"max_assets": MAX_ASSETS})

    def default_resource(self, target: Target) -> str | None:
        return source_resource(target)

    def parse_params(self, params: Any) -> ParsedParams:
        return parse_params(params)

    def run(self, job: JobRun) -> Outcome:
        from jobstream.jobtypes.asset_fetch.config import load_config  # noqa: PLC0415
        from jobstream.jobtypes.asset_fetch.executor import run as fetch_all  # noqa: PLC0415
        from jobstream.jobtypes.asset_fetch.sources import open_asset_source  # noqa: PLC0415
        from jobstream.jobtypes.asset_fetch.storage import S3AssetStore  # noqa: PLC0415
        from jobstream.jobtypes.sources.base import (  # noqa: PLC0415
            SourceError,
        )

        if job.target is None:
            raise TypeError("an asset_fetch job runs on a target")
        try:
            config = load_config()
            settings = SourceSettings.model_validate(job.target.settings)
            source = open_asset_source(settings, config, job.context.before_source_request)
        except SourceError as error:
            return error.outcome()
        return fetch_all(job, source, S3AssetStore(config.bucket), config)

    def result_model(self) -> type[BaseModel]:
        from jobstream.jobtypes.asset_fetch.result import ResultAssetFetch  # noqa: PLC0415

        return ResultAssetFetch

    def summarize_result(self, result: Mapping[str, Any]) -> ResultSummary:
        assets = result.get("assets") or []
        total = sum(asset.get("bytes") or 0 for asset in assets)
        items = tuple(
            f"{asset.get('asset_id')}: {asset.get('mime')}, {asset.get('bytes')} bytes, "
            f"{(asset.get('locator') or {}).get('value')}"
            for asset in assets
        )
        return ResultSummary(f"{len(assets)} asset(s), {total} bytes", items)


JOB_TYPE = AssetFetch()
