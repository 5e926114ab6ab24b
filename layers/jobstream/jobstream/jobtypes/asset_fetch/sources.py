"""Where asset_fetch reads files: the target's own source (catalog files, or Pixiv over HTTP)."""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol
from urllib.parse import urlsplit

from jobstream.jobtypes.asset_fetch.config import AssetFetchConfig
from jobstream.jobtypes.asset_fetch.fetch import fetch
from jobstream.jobtypes.sources.base import SourceAsset, SourceError
from jobstream.jobtypes.sources.catalog import CatalogSource, catalog_path
from jobstream.jobtypes.sources.settings import SourceSettings
from jobstream.outbound.guard import Resolver, system_resolver
from jobstream.protocol.errors import Reason

# Pixiv's image hosts answer 403 without the app's Referer (and expect an app User-Agent).
PIXIV_HEADERS: Final = {
    "Referer": "https://app-api.pixiv.net/",
    "User-Agent": "PixivIOSApp/7.13.3 (iOS 14.6; iPhone13,2)",
}
OCTET_STREAM: Final = "application/octet-stream"


@dataclass(frozen=True, slots=True)
class Read:
    """An asset's bytes (at most `max_bytes + 1`: more means too large), its media type, and
    where they came from: the URL fetched, or the URL of the catalog entry whose file was read
    (a Task may name an asset by id with a URL of its own)."""

    body: bytes
    mime: str
    source_url: str


class AssetSource(Protocol):
    platform: str

    def assets_of(self, work_id: str) -> tuple[SourceAsset, ...]:
        """The assets of one work; SourceError when the work cannot be found."""
        ...

    def read(self, asset: SourceAsset, max_bytes: int, checkpoint: Callable[[], None]) -> Read:
        """The asset's bytes; SourceError when they cannot be read."""
        ...


def _mime(declared: str | None, name: str) -> str:
    if declared:
        return declared.split(";", 1)[0].strip() or OCTET_STREAM
    guessed, _ = mimetypes.guess_type(name)
    return guessed or OCTET_STREAM


class CatalogAssets:
    """Files the catalog names beside it: no network at all."""

    platform = "pixiv"  # the catalog stands in for Pixiv (demos, tests, the local stack)

    def __init__(self, catalog: CatalogSource) -> None:
        self._catalog = catalog

    def assets_of(self, work_id: str) -> tuple[SourceAsset, ...]:
        work = self._catalog.work(work_id)
        if work is None:
            raise SourceError(Reason.METADATA_FAILED, f"work {work_id} is not in the catalog")
        return work.assets

    def read(self, asset: SourceAsset, max_bytes: int, checkpoint: Callable[[], None]) -> Read:
        del checkpoint  # a local read is short
        known = self._known(asset)
        body = self._catalog.read_file(known, max_bytes)
        return Read(body, _mime(known.mime, known.file or known.url), source_url=known.url)

    def _known(self, asset: SourceAsset) -> SourceAsset:
        """The catalog's own entry for an asset a Task named (by URL, else by id): only files
        the catalog lists are ever read."""
        listed = list(self._catalog.assets())
        found = next((entry for entry in listed if entry.url == asset.url), None) or next(
            (entry for entry in listed if entry.asset_id == asset.asset_id), None
        )
        if found is not None:
            return found
        raise SourceError(Reason.DOWNLOAD_FAILED, f"asset {asset.asset_id} is not in the catalog")


class PixivAssets:
    """Pixiv's files over HTTP, with the headers its image hosts require, under the SSRF rules."""

    platform = "pixiv"

    def __init__(
        self,
        settings: SourceSettings,
        config: AssetFetchConfig,
        resolver: Resolver = system_resolver,
        before_request: Callable[[], None] | None = None,
    ) -> None:
        self._settings = settings
        self._config = config
        self._resolver = resolver
        # The job's resource gate, before each request to Pixiv's app API (not its image hosts).
        self._before_request = before_request

    def assets_of(self, work_id: str) -> tuple[SourceAsset, ...]:
        from jobstream.jobtypes.sources.pixiv import (  # noqa: PLC0415
            PixivSource,
            refresh_token_from_environment,
        )

        source = PixivSource(
            refresh_token_from_environment(),
            api_host=self._settings.api_host,
            before_request=self._before_request,
        )
        return source.work(work_id, self._settings.work_type).assets

    def read(self, asset: SourceAsset, max_bytes: int, checkpoint: Callable[[], None]) -> Read:
        fetched = fetch(
            asset.url,
            asset_id=asset.asset_id,
            origins=self._config.origins,
            headers=PIXIV_HEADERS,
            max_bytes=max_bytes,
            timeout_s=self._config.timeout_s,
            checkpoint=checkpoint,
            resolver=self._resolver,
        )
        mime = _mime(fetched.content_type, urlsplit(asset.url).path)
        return Read(fetched.body, mime, source_url=asset.url)


def open_asset_source(
    settings: SourceSettings, config: AssetFetchConfig, before_request: Callable[[], None]
) -> AssetSource:
    """The source the target's settings name, calling `before_request` (the job's resource
    gate) before each request for a work's metadata."""
    if settings.source == "pixiv":
        return PixivAssets(settings, config, before_request=before_request)
    return CatalogAssets(CatalogSource(catalog_path(), before_request=before_request))
