"""The `catalog` source: works read from a local JSON file, for demos, tests and the local stack."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from jobstream.config.environment import variable
from jobstream.jobtypes.sources.base import (
    SearchRequest,
    SourceAsset,
    SourceError,
    Work,
    ungated,
)
from jobstream.protocol.errors import Reason

DEFAULT_CATALOG: Path = Path(__file__).resolve().parent / "catalog.sample.json"
CATALOG_ENV = "JOBSTREAM_CATALOG"


def catalog_path() -> Path:
    """The catalog file: `JOBSTREAM_CATALOG`, else the sample shipped in the layer."""
    configured = variable(CATALOG_ENV).strip()
    return Path(configured) if configured else DEFAULT_CATALOG


def _broken_rule(work: Work) -> str | None:
    """The first rule of a catalog entry `work` breaks, beyond a Work's types (a Pixiv work may
    come with empty ids or URLs; a hand-written catalog may not)."""
    if not work.work_id.isascii() or not work.work_id.isdigit():
        # Numeric, because "newest first" orders by the id as a number.
        return f"work_id {work.work_id!r} is not a number"
    if not work.url or "" in work.tags:
        return f"work {work.work_id}: its url and tags must be non-empty"
    if any(not asset.asset_id or not asset.url for asset in work.assets):
        return f"work {work.work_id}: each asset needs a non-empty asset_id and url"
    if "extra" in work.model_fields_set:
        # What a Pixiv work carries besides its fields: a catalog entry names fields only.
        return f"work {work.work_id}: extra is not a field of a catalog work"
    return None


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    works: list[Work]

    @field_validator("works")
    @classmethod
    def _by_the_rules(cls, works: list[Work]) -> list[Work]:
        seen: set[str] = set()
        for work in works:
            broken = _broken_rule(work)
            if broken is not None:
                raise ValueError(broken)
            if work.work_id in seen:
                raise ValueError(f"duplicate work_id {work.work_id}")
            seen.add(work.work_id)
        return works


@lru_cache(maxsize=8)
def load_catalog(path: Path, mtime_ns: int) -> tuple[Work, ...]:
    """Parse and validate once per file version; the mtime in the key invalidates the cache.

    Sorted newest first (highest numeric work id first). Failures are not cached.
    """
    del mtime_ns  # only part of the cache key
    try:
        document = _CatalogFile.model_validate_json(path.read_bytes())
    except OSError as error:
        raise SourceError(
            Reason.CONFIGURATION_ERROR, f"catalog {path.name} cannot be read: {error.strerror}"
        ) from error
    except ValidationError as error:
        details = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<root>'}: {item['msg']}"
            for item in error.errors()[:3]
        )
        raise SourceError(
            Reason.CONFIGURATION_ERROR, f"catalog {path.name} is invalid: {details}"
        ) from error
    works = sorted(document.works, key=lambda work: int(work.work_id), reverse=True)
    return tuple(works)


def _matches(work: Work, wanted: list[str], match_any: bool) -> bool:
    tags = {tag.casefold() for tag in work.tags}
    hits = [tag in tags for tag in wanted]
    return any(hits) if match_any else all(hits)


class CatalogSource:
    """Implements `Source` over a JSON file `{"works": [...]}`.

    `before_request` (the job's resource gate) is called once per `search()` and once per
    `work()`, where a remote source would make its requests, so the catalog exercises the gate.
    """

    def __init__(
        self,
        path: Path,
        scan_delay_ms: int = 0,
        sleep: Callable[[float], None] = time.sleep,
        before_request: Callable[[], None] | None = None,
    ) -> None:
        self._path = path
        self._scan_delay_s = max(scan_delay_ms, 0) / 1000
        self._sleep = sleep
        self._before_request = before_request or ungated

    def _works(self) -> tuple[Work, ...]:
        try:
            mtime_ns = self._path.stat().st_mtime_ns
        except OSError as error:
            raise SourceError(
                Reason.CONFIGURATION_ERROR, f"catalog {self._path.name} not found"
            ) from error
        return load_catalog(self._path.resolve(), mtime_ns)

    def work(self, work_id: str) -> Work | None:
        """One work by id, or None when the catalog has no such work."""
        self._before_request()
        return next((work for work in self._works() if work.work_id == work_id), None)

    def assets(self) -> Iterator[SourceAsset]:
        """Every asset of every work, newest work first."""
        for work in self._works():
            yield from work.assets

    def read_file(self, asset: SourceAsset, max_bytes: int) -> bytes:
        """The asset's local copy, at most `max_bytes + 1` bytes (more than `max_bytes`: the file
        is too large); SourceError when it has none or it escapes the catalog's directory."""
        if asset.file is None:
            raise SourceError(
                Reason.DOWNLOAD_FAILED, f"asset {asset.asset_id} has no file in the catalog"
            )
        folder = self._path.resolve().parent
        path = (folder / asset.file).resolve()
        # A hand-edited catalog must not make jobstream read (and publish) any file it can.
        if not path.is_relative_to(folder):
            raise SourceError(
                Reason.CONFIGURATION_ERROR,
                f"asset {asset.asset_id}: its file is outside the catalog",
            )
        try:
            with path.open("rb") as handle:
                return handle.read(max_bytes + 1)
        except OSError as error:
            raise SourceError(
                Reason.DOWNLOAD_FAILED, f"asset {asset.asset_id}: its file cannot be read"
            ) from error

    def search(self, request: SearchRequest) -> Iterator[Work]:
        """Works of the requested type carrying all (or any) of the tags, newest first."""
        self._before_request()
        works = self._works()  # eagerly, so a bad file fails at search(), not mid-scan
        return self._scan(works, request)

    def _scan(self, works: tuple[Work, ...], request: SearchRequest) -> Iterator[Work]:
        wanted = [tag.casefold() for tag in request.tags]
        yielded = 0
        for work in works:
            if yielded >= request.scan_limit:
                return
            if work.work_type != request.work_type or not _matches(work, wanted, request.match_any):
                continue
            if yielded and self._scan_delay_s:
                # Simulates a slow remote source, so cancellation and heartbeats can be exercised.
                self._sleep(self._scan_delay_s)
            yielded += 1
            yield work
