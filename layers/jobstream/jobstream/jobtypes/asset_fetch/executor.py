"""Run one asset_fetch: read each asset from the source, store it, describe it as an Asset."""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.jobtypes.asset_fetch.config import AssetFetchConfig
from jobstream.jobtypes.asset_fetch.fetch import too_large
from jobstream.jobtypes.asset_fetch.keys import object_key
from jobstream.jobtypes.asset_fetch.params import MAX_ASSETS
from jobstream.jobtypes.asset_fetch.sources import AssetSource, Read
from jobstream.jobtypes.asset_fetch.storage import AssetStore, SignedUrl
from jobstream.jobtypes.base import JobRun, Outcome
from jobstream.jobtypes.sources.base import SourceAsset, SourceError
from jobstream.protocol.errors import Reason
from jobstream.retries import transient

logger = logging.getLogger(__name__)

STAGE: Final = "fetching"


def wanted_assets(params: dict[str, Any], source: AssetSource) -> tuple[SourceAsset, ...]:
    """The assets the params name, or the work's assets; SourceError when the work is unknown
    or has more assets than one job fetches."""
    work_id = params.get("work_id")
    if isinstance(work_id, str):
        assets = source.assets_of(work_id)
        if len(assets) > MAX_ASSETS:
            raise SourceError(
                Reason.DOWNLOAD_FAILED,
                f"work {work_id} has {len(assets)} assets, more than the {MAX_ASSETS} one job "
                "fetches; name the assets instead",
            )
        return assets
    return tuple(
        SourceAsset(
            asset_id=item["asset_id"],
            type=item.get("type", "image"),
            role=item.get("role", "primary"),
            url=item["url"],
        )
        for item in params.get("assets") or []
    )


def run(job: JobRun, source: AssetSource, store: AssetStore, config: AssetFetchConfig) -> Outcome:
    """Fetch every asset in order; the first failure fails the job (its error says which).
    JobInterruptedError from `checkpoint()` propagates.

    Each URL is signed once its asset is stored, so each expires on its own; the result's
    `expires_at` is the earliest of them (the first's, signed before the downloads after it):
    every URL still works until then."""
    context = job.context
    try:
        wanted = wanted_assets(job.params, source)
    except SourceError as error:
        return error.outcome()
    if not wanted:
        return Outcome(reason=Reason.NO_CANDIDATE, message="the work has no assets")
    documents: list[dict[str, Any]] = []
    for index, asset in enumerate(wanted):
        # Before each asset, so a cancel, a lost lease or the deadline stops the job promptly.
        context.checkpoint()
        context.progress(STAGE, f"asset {index + 1} of {len(wanted)}: {asset.asset_id}")
        try:
            read = source.read(asset, config.max_bytes, context.checkpoint)
            if len(read.body) > config.max_bytes:
                raise too_large(asset.asset_id, config.max_bytes)
        except SourceError as error:
            return error.outcome()
        digest = hashlib.sha256(read.body).hexdigest()
        key = object_key(job.job_id, index, asset.asset_id)
        try:
            store.put(key, read.body, read.mime, digest)
            signed = store.url(key, config.url_ttl_s)
        except Exception as error:
            logger.warning("storing an asset failed", exc_info=True)
            return storage_failure(asset.asset_id, error)
        documents.append(_document(asset, source.platform, read, digest=digest, signed=signed))
    context.progress("stored", f"{len(documents)} asset(s) stored")
    expires_at = min(document["metadata"]["expires_at"] for document in documents)
    result: dict[str, Any] = {"assets": documents, "expires_at": expires_at}
    if isinstance(job.params.get("work_id"), str):
        result["work_id"] = job.params["work_id"]
    return Outcome(result=result)


def storage_failure(asset_id: str, error: Exception) -> Outcome:
    """How the job ends when S3 did not store an asset. A refusal retrying cannot cure (no such
    bucket, access denied) is the deployment's to fix; anything else (throttling, 5xx, a lost
    connection, after the client's retries) may pass later: network_error, a retryable
    source_error (the protocol has no job-terminal code for the producer's own storage)."""
    if isinstance(error, ClientError) and transient(error) is None:
        code = error.response.get("Error", {}).get("Code", "an error")
        return Outcome(
            reason=Reason.CONFIGURATION_ERROR,
            message=f"asset {asset_id} could not be stored: S3 refused it ({code})",
        )
    return Outcome(
        reason=Reason.NETWORK_ERROR,
        message=f"asset {asset_id} could not be stored; S3 may accept it on a retry",
    )


def _document(
    asset: SourceAsset, platform: str, read: Read, *, digest: str, signed: SignedUrl
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "asset_id": asset.asset_id,
        "type": asset.type,
        "role": asset.role,
        "source": platform,
        # Files as the platform serves them; nothing here is author-supplied art.
        "quality": "default",
        "mime": read.mime,
        "bytes": len(read.body),
        "hash": f"sha256:{digest}",
        "locator": {"kind": "url", "value": signed.url},
        "metadata": {
            "sha256": digest,
            "expires_at": signed.expires_at,
            "source_url": read.source_url,
        },
    }
    if asset.width is not None:
        document["width"] = asset.width
    if asset.height is not None:
        document["height"] = asset.height
    return document
