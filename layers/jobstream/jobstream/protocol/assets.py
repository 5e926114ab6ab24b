"""The protocol's asset vocabulary: what an Asset's `type` and `role` may be. Pure data, cheap to
import (admission checks params against it)."""

from __future__ import annotations

from typing import Final, Literal, get_args

AssetType = Literal["image", "novel", "metadata", "cover"]
AssetRole = Literal["primary", "cover", "preview"]

ASSET_TYPES: Final[tuple[str, ...]] = get_args(AssetType)
ASSET_ROLES: Final[tuple[str, ...]] = get_args(AssetRole)
