"""asset_fetch params: the assets to fetch (as a candidate lists them) or the work they belong to.

Pure. Limits are checked here, so a Task that asks for too much is a 400 and nothing is written;
an asset id must also fit the object key it is stored under (keys.py: S3 refuses a key over
1,024 bytes, and an id of 200 characters may percent-encode to 1,800).
"""

from __future__ import annotations

from typing import Any, Final

from jobstream.jobtypes.asset_fetch.keys import MAX_KEY_BYTES, longest_key_bytes
from jobstream.outbound.url import OutboundRefused, parse_url
from jobstream.protocol.assets import ASSET_ROLES, ASSET_TYPES
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.js import is_blank, js_length, js_trim
from jobstream.protocol.task import ParsedParams, non_blank_string, parse_target_id

MAX_ASSETS: Final = 20
MAX_ASSET_ID_LENGTH: Final = 200
MAX_URL_LENGTH: Final = 2000
MAX_WORK_ID_LENGTH: Final = 32


def parse_params(params: Any) -> ParsedParams:
    """`{"assets": [Asset, ...]}` or `{"work_id": "..."}` (exactly one), and `target_id`."""
    if not isinstance(params, dict):
        raise invalid_params("params must be a JSON object")
    assets, work_id = params.get("assets"), params.get("work_id")
    if (assets is None) == (work_id is None):
        raise invalid_params(
            "params must name either assets or a work_id",
            detail={"reason": "assets_or_work_id"},
        )
    normalized: dict[str, Any] = (
        {"assets": _parse_assets(assets)} if assets is not None else {"work_id": _work_id(work_id)}
    )
    return ParsedParams(params=normalized, target_id=parse_target_id(params.get("target_id")))


def _work_id(value: Any) -> str:
    if not isinstance(value, str) or is_blank(value):
        raise invalid_params("params.work_id must be a non-empty string of digits")
    trimmed = js_trim(value)
    if not trimmed.isascii() or not trimmed.isdigit() or len(trimmed) > MAX_WORK_ID_LENGTH:
        raise invalid_params(
            f"params.work_id must be a string of at most {MAX_WORK_ID_LENGTH} digits"
        )
    return trimmed


def _parse_assets(assets: Any) -> list[dict[str, str]]:
    if not isinstance(assets, list) or not assets:
        raise invalid_params("params.assets must be a non-empty array of Asset objects")
    if len(assets) > MAX_ASSETS:
        raise invalid_params(
            f"params.assets holds {len(assets)} assets; at most {MAX_ASSETS} are fetched per job",
            detail={
                "reason": "too_many_assets",
                "field": "params.assets",
                "count": len(assets),
                "max": MAX_ASSETS,
            },
        )
    normalized = [_parse_asset(index, asset) for index, asset in enumerate(assets)]
    seen: set[str] = set()
    for asset in normalized:
        if asset["asset_id"] in seen:
            raise invalid_params(
                f"params.assets names asset_id {asset['asset_id']!r} twice",
                detail={"reason": "duplicate_asset", "asset_id": asset["asset_id"]},
            )
        seen.add(asset["asset_id"])
    return normalized


def _parse_url(field: str, url: Any) -> str:
    if not isinstance(url, str) or js_length(url) > MAX_URL_LENGTH:
        raise invalid_params(
            f"{field}.locator.value must be a URL of at most {MAX_URL_LENGTH} characters"
        )
    try:
        # Syntax only (no DNS): the source's own rules decide at run time where it may connect.
        parse_url(url, allow_http=False)
    except OutboundRefused as refusal:
        raise invalid_params(
            f"{field}.locator.value is not a URL jobstream fetches: {refusal.message}",
            detail={"reason": "asset_url_refused", "refusal": refusal.reason},
        ) from None
    return url


def _fitting_key(field: str, asset_id: str) -> str:
    """`asset_id`, when the object key it makes fits S3's limit in every job."""
    key_bytes = longest_key_bytes(asset_id)
    if key_bytes > MAX_KEY_BYTES:
        raise invalid_params(
            f"{field}.asset_id is too long to store the asset under: its object key would be "
            f"{key_bytes} bytes (URL-encoded), over S3's {MAX_KEY_BYTES}",
            detail={
                "reason": "asset_id_too_long",
                "field": f"{field}.asset_id",
                "key_bytes": key_bytes,
                "max": MAX_KEY_BYTES,
            },
        )
    return asset_id


def _parse_asset(index: int, asset: Any) -> dict[str, str]:
    field = f"params.assets[{index}]"
    if not isinstance(asset, dict):
        raise invalid_params(f"{field} must be an Asset object")
    asset_id = asset.get("asset_id")
    if not isinstance(asset_id, str) or not non_blank_string(asset_id, MAX_ASSET_ID_LENGTH):
        raise invalid_params(
            f"{field}.asset_id must be a non-empty string of at most {MAX_ASSET_ID_LENGTH} chars"
        )
    locator = asset.get("locator")
    if not isinstance(locator, dict) or locator.get("kind") != "url":
        raise invalid_params(f"{field}.locator must be a locator of kind 'url'")
    url = _parse_url(field, locator.get("value"))
    normalized = {"asset_id": _fitting_key(field, js_trim(asset_id)), "url": url}
    for name, allowed in (("type", ASSET_TYPES), ("role", ASSET_ROLES)):
        value = asset.get(name)
        if value is not None:
            if value not in allowed:
                raise invalid_params(f"{field}.{name} must be one of {', '.join(allowed)}")
            normalized[name] = value
    return normalized
