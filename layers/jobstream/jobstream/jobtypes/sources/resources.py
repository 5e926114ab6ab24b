"""The shared resource a source's targets run against unless they name another."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from jobstream.config.targets import ResourceLimits, Target
from jobstream.jobtypes.sources.settings import SourceSettings

PIXIV_RESOURCE: Final = "pixiv"
# One Pixiv account (the deployment's one refresh token) runs one job at a time: parallel runs
# pushed the reference producer's account into a 429 cooldown; serial ones never did.
SOURCE_RESOURCES: Final = MappingProxyType({PIXIV_RESOURCE: ResourceLimits(max_concurrent=1)})


def source_resource(target: Target) -> str | None:
    """A `pixiv` target's account: the `pixiv` resource; a catalog has no limit of its own."""
    settings = SourceSettings.model_validate(target.settings)
    return PIXIV_RESOURCE if settings.source == "pixiv" else None
