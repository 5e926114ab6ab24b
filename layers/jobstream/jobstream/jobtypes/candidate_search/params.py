"""candidate_search params: validation and normalization (reference §7.1), reference messages.

Pure. The Task envelope around them is checked by `protocol.task`; `target_id` is checked last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from jobstream.protocol.errors import invalid_params
from jobstream.protocol.js import is_js_integer, js_trim
from jobstream.protocol.task import (
    MAX_SAFE_INTEGER,
    ParsedParams,
    non_blank_string,
    parse_target_id,
)

MAX_TAGS: Final = 20
MAX_TAG_LENGTH: Final = 100
MAX_ACCOUNT_LENGTH: Final = 100
MAX_EXCLUDES: Final = 100
MAX_EXCLUDE_ID_LENGTH: Final = 100
EXCLUDE_KINDS: Final = ("work", "candidate", "tag")
# A run returns at most MAX_LIMIT candidates and looks at most at MAX_SCAN_LIMIT works: a larger
# `limit` or `scan_limit` (given, or a target's default) is capped, not refused.
MAX_LIMIT: Final = 100
MAX_SCAN_LIMIT: Final = 100


@dataclass(frozen=True, slots=True)
class CandidateSearchParams(ParsedParams):
    """Normalized candidate_search params, with the views the target rules read."""

    @property
    def account(self) -> str | None:
        source = self.params.get("source")
        return source.get("account") if isinstance(source, dict) else None

    @property
    def work_types(self) -> list[str]:
        constraints = self.params.get("constraints")
        if isinstance(constraints, dict):
            return list(constraints.get("work_types") or [])
        return []


def parse_params(params: Any) -> CandidateSearchParams:
    """Validate and normalize `params` (reference §7.1); `target_id` is checked last."""
    if not isinstance(params, dict):
        raise invalid_params("params must be a JSON object")
    normalized: dict[str, Any] = {}
    for name, parse in _PARTS:
        part = params.get(name)
        if part is None:
            continue
        if not isinstance(part, dict):
            raise invalid_params(f"params.{name} must be a JSON object")
        parsed = parse(part)
        if parsed is not None:
            normalized[name] = parsed
    return CandidateSearchParams(
        params=normalized, target_id=parse_target_id(params.get("target_id"))
    )


def _parse_source(source: dict[str, Any]) -> dict[str, Any] | None:
    normalized: dict[str, Any] = {}
    platform = source.get("platform")
    if platform is not None:
        if platform != "pixiv":
            raise invalid_params(
                "params.source.platform must be 'pixiv'", detail={"received": platform}
            )
        normalized["platform"] = "pixiv"
    account = source.get("account")
    if account is not None:
        if not non_blank_string(account, MAX_ACCOUNT_LENGTH):
            raise invalid_params("params.source.account must be a non-empty string")
        normalized["account"] = account
    return normalized or None


def _parse_query(query: dict[str, Any]) -> dict[str, Any]:
    tags = query.get("tags")
    tags_message = "params.query.tags must be a non-empty array of strings"
    if not isinstance(tags, list) or not tags:
        raise invalid_params(tags_message)
    if len(tags) > MAX_TAGS:
        raise invalid_params(f"params.query.tags must contain at most {MAX_TAGS} tags")
    if not all(non_blank_string(tag, MAX_TAG_LENGTH) for tag in tags):
        raise invalid_params(tags_message)
    normalized: dict[str, Any] = {"tags": [js_trim(tag) for tag in tags]}
    expand = query.get("expand")
    if expand is not None and not isinstance(expand, bool):
        raise invalid_params("params.query.expand must be a boolean")
    if expand is True:
        normalized["expand"] = True
    return normalized


def _parse_constraints(constraints: dict[str, Any]) -> dict[str, Any]:
    normalized: dict[str, Any] = {}
    exclude = constraints.get("exclude")
    if exclude is not None:
        normalized["exclude"] = _parse_exclude(exclude)
    for name in ("limit", "scan_limit"):
        value = constraints.get(name)
        if value is not None:
            normalized[name] = _parse_count(name, value)
    work_types = constraints.get("work_types")
    if work_types is not None:
        normalized["work_types"] = _parse_work_types(work_types)
    return normalized


# The params' objects in the order their errors are reported (reference §7.1); each parser
# gets the object and returns its normalized form (None: nothing to keep).
_PARTS: Final[tuple[tuple[str, Callable[[dict[str, Any]], dict[str, Any] | None]], ...]] = (
    ("source", _parse_source),
    ("query", _parse_query),
    ("constraints", _parse_constraints),
)


def _parse_count(name: str, value: Any) -> int:
    """`limit` or `scan_limit`: an integer of at least 1 (scan_limit capped, limit bounded)."""
    if not is_js_integer(value) or value < 1:
        raise invalid_params(f"params.constraints.{name} must be an integer of at least 1")
    if name == "limit" and value > MAX_SAFE_INTEGER:
        # It is stored, and DynamoDB cannot hold every integer a JSON number can write
        # (1e300 has 301 digits); no consumer's JavaScript can hold one this large exactly.
        raise invalid_params(
            f"params.constraints.limit must be at most {MAX_SAFE_INTEGER}",
            detail={"field": "params.constraints.limit", "max": MAX_SAFE_INTEGER},
        )
    return min(int(value), MAX_SCAN_LIMIT) if name == "scan_limit" else int(value)


def _parse_work_types(work_types: Any) -> list[str]:
    if not isinstance(work_types, list) or not all(
        isinstance(item, str) and item != "" for item in work_types
    ):
        raise invalid_params("params.constraints.work_types must be an array of non-empty strings")
    return list(work_types)


def _parse_exclude(exclude: Any) -> list[dict[str, str]]:
    if not isinstance(exclude, list) or len(exclude) > MAX_EXCLUDES:
        raise invalid_params(
            f"params.constraints.exclude must be an array of at most {MAX_EXCLUDES} items"
        )
    normalized: list[dict[str, str]] = []
    for item in exclude:
        kind = item.get("kind") if isinstance(item, dict) else None
        if kind not in EXCLUDE_KINDS:
            raise invalid_params(
                "params.constraints.exclude[].kind must be one of work, candidate, tag"
            )
        item_id = item.get("id")
        if not non_blank_string(item_id, MAX_EXCLUDE_ID_LENGTH):
            raise invalid_params("params.constraints.exclude[].id must be a non-empty string")
        normalized.append({"kind": kind, "id": js_trim(item_id)})
    return normalized
