"""asset_fetch's configuration, read from the environment when a job runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from jobstream.config.environment import environment
from jobstream.jobtypes.sources.base import SourceError
from jobstream.outbound.origins import OriginPattern, parse_origins
from jobstream.protocol.errors import Reason

BUCKET_ENV: Final = "JOBSTREAM_ASSET_BUCKET"
URL_TTL_ENV: Final = "JOBSTREAM_ASSET_URL_TTL_S"
MAX_BYTES_ENV: Final = "JOBSTREAM_ASSET_MAX_BYTES"
ORIGINS_ENV: Final = "JOBSTREAM_ASSET_ORIGINS"

DEFAULT_URL_TTL_S: Final = 3600
# SigV4 presigned URLs live at most 7 days.
MAX_URL_TTL_S: Final = 7 * 24 * 3600
DEFAULT_MAX_BYTES: Final = 20 * 1024 * 1024
# Held in memory while hashed and stored: well inside a 512 MB function.
MAX_MAX_BYTES: Final = 100 * 1024 * 1024
# Pixiv serves its images from i.pximg.net; a wildcard origin admits public addresses only.
DEFAULT_ORIGINS: Final = ("https://*.pximg.net",)
DOWNLOAD_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class AssetFetchConfig:
    bucket: str
    url_ttl_s: int
    max_bytes: int
    origins: tuple[OriginPattern, ...]
    timeout_s: float = DOWNLOAD_TIMEOUT_S


def _bounded(env: Mapping[str, str], name: str, default: int, high: int) -> int:
    text = (env.get(name) or "").strip()
    if not text:
        return default
    if not text.isdigit() or not 1 <= int(text) <= high:
        raise SourceError(Reason.CONFIGURATION_ERROR, f"{name} must be an integer from 1 to {high}")
    return int(text)


def load_config(env: Mapping[str, str] | None = None) -> AssetFetchConfig:
    """The configuration; SourceError(configuration_error) when it is missing or invalid."""
    env = environment() if env is None else env
    bucket = (env.get(BUCKET_ENV) or "").strip()
    if not bucket:
        raise SourceError(Reason.CONFIGURATION_ERROR, f"{BUCKET_ENV} is not configured")
    texts = [text.strip() for text in (env.get(ORIGINS_ENV) or "").split(",") if text.strip()]
    try:
        origins = parse_origins(texts or DEFAULT_ORIGINS)
    except ValueError as error:
        raise SourceError(
            Reason.CONFIGURATION_ERROR, f"{ORIGINS_ENV} is invalid: {error}"
        ) from None
    return AssetFetchConfig(
        bucket=bucket,
        url_ttl_s=_bounded(env, URL_TTL_ENV, DEFAULT_URL_TTL_S, MAX_URL_TTL_S),
        max_bytes=_bounded(env, MAX_BYTES_ENV, DEFAULT_MAX_BYTES, MAX_MAX_BYTES),
        origins=origins,
    )
