"""The model every asset_fetch result is checked against: protocol Assets with a size, a media
type and a sha256 hash each."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictStr

from jobstream.protocol.models import Asset, NonNegativeInt, ProtocolModel


class FetchedAsset(Asset):
    asset_id: Annotated[StrictStr, Field(min_length=1)]
    mime: StrictStr
    bytes: NonNegativeInt
    hash: Annotated[StrictStr, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


class ResultAssetFetch(ProtocolModel):
    assets: Annotated[list[FetchedAsset], Field(min_length=1)]
    expires_at: NonNegativeInt
    work_id: StrictStr | None = None
