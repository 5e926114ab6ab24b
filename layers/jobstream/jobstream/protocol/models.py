"""Pydantic models of the protocol objects a job type's result is made of (Asset, Locator), and
their base.

Unknown fields are kept and ignored (the protocol is additive-only). Documents are produced with
``model_dump(mode="json", exclude_unset=True)`` so a field is on the wire exactly when the builder
set it, in declaration order. The models of the other protocol objects are test support: the
runtime builds those documents directly (`protocol.documents`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from jobstream.protocol.assets import AssetRole, AssetType

NonNegativeInt = Annotated[StrictInt, Field(ge=0)]


class ProtocolModel(BaseModel):
    # defer_build: schemas are built on first use, which keeps cold imports cheap.
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    def document(self) -> dict[str, Any]:
        """The wire document: exactly the fields that were set, in declaration order."""
        return self.model_dump(mode="json", exclude_unset=True)


class Locator(ProtocolModel):
    kind: Literal["url", "path", "inline"]
    value: StrictStr


class Asset(ProtocolModel):
    asset_id: StrictStr
    type: AssetType
    role: AssetRole
    source: Literal["pixiv", "author", "generated", "unknown"]
    quality: Literal["default", "custom", "unknown"]
    locator: Locator
    width: NonNegativeInt | None = None
    height: NonNegativeInt | None = None
    bytes: NonNegativeInt | None = None
    mime: StrictStr | None = None
    hash: StrictStr | None = None
    metadata: dict[str, Any] | None = None
