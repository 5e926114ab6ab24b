"""Task and candidate_search params validation, in the reference order with the reference messages.

Pure: takes the decoded JSON body, returns an AdmissionRequest or raises ProtocolError (HTTP 400).
"Absent" means missing or JSON null throughout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from jobstream.protocol.errors import ErrorCode, ProtocolError, invalid_params
from jobstream.protocol.js import is_blank, is_js_integer, js_json, js_length, js_trim

PROTOCOL_VERSION: Final = "1"
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)
JOB_TYPE_CANDIDATE_SEARCH: Final = "candidate_search"
SUPPORTED_JOB_TYPES: Final = (JOB_TYPE_CANDIDATE_SEARCH,)

MAX_IDEMPOTENCY_KEY: Final = 200
MAX_CORRELATION_ID: Final = 200
MAX_CALLBACK_URL: Final = 2000
MIN_DEADLINE_MS: Final = 1000
MAX_TAGS: Final = 20
MAX_TAG_LENGTH: Final = 100
MAX_ACCOUNT_LENGTH: Final = 100
MAX_EXCLUDES: Final = 100
MAX_EXCLUDE_ID_LENGTH: Final = 100
MAX_SCAN_LIMIT: Final = 100
MAX_TARGET_ID: Final = 200
# Number.MAX_SAFE_INTEGER: the largest integer every JSON consumer holds exactly.
MAX_SAFE_INTEGER: Final = 2**53 - 1
EXCLUDE_KINDS: Final = ("work", "candidate", "tag")


@dataclass(frozen=True, slots=True)
class CandidateSearchRequest:
    """Normalized params (the stored, compared view) plus the target selector lifted out of them."""

    params: dict[str, Any]
    target_id: str | None

    @property
    def canonical(self) -> str:
        """The idempotency comparison form: key order fixed by normalization, tag order kept."""
        return json.dumps(self.params, ensure_ascii=False, separators=(",", ":"))

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


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """A validated Task."""

    job_type: str
    idempotency_key: str
    correlation_id: str | None
    labels: dict[str, str] | None
    callback_url: str | None
    deadline_ms: int | None
    search: CandidateSearchRequest


def _absent(body: dict[str, Any], key: str) -> bool:
    return body.get(key) is None


def parse_task(body: Any) -> AdmissionRequest:
    """Validate a Task body in the reference order; the first failure wins."""
    if not isinstance(body, dict):
        raise invalid_params("body must be a JSON object")
    _check_protocol_version(body)
    job_type = _parse_job_type(body.get("job_type"))
    key = _trimmed_string(body.get("idempotency_key"), "idempotency_key", MAX_IDEMPOTENCY_KEY)
    correlation_id = body.get("correlation_id")
    if correlation_id is not None and not _short_string(correlation_id, MAX_CORRELATION_ID):
        raise invalid_params(
            f"correlation_id must be a string of at most {MAX_CORRELATION_ID} chars"
        )
    callback_url = body.get("callback_url")
    if callback_url is not None and not _short_string(callback_url, MAX_CALLBACK_URL):
        raise invalid_params(f"callback_url must be a string of at most {MAX_CALLBACK_URL} chars")
    deadline_ms = body.get("deadline_ms")
    if deadline_ms is not None and (
        not is_js_integer(deadline_ms) or deadline_ms < MIN_DEADLINE_MS
    ):
        raise invalid_params(f"deadline_ms must be an integer of at least {MIN_DEADLINE_MS} ms")
    labels = _parse_labels(body.get("labels"))
    search = parse_candidate_search_params(body.get("params"))
    return AdmissionRequest(
        job_type=job_type,
        idempotency_key=key,
        # An empty correlation id is accepted and means "no correlation".
        correlation_id=correlation_id or None,
        labels=labels,
        # An empty callback URL is accepted and means "no callback".
        callback_url=callback_url or None,
        deadline_ms=int(deadline_ms) if deadline_ms is not None else None,
        search=search,
    )


def _check_protocol_version(body: dict[str, Any]) -> None:
    if _absent(body, "protocol_version"):
        raise invalid_params("protocol_version is required")
    version = body["protocol_version"]
    if version != PROTOCOL_VERSION or not isinstance(version, str):
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            f"unsupported protocol_version {js_json(version)}",
            detail={"received": version, "supported": list(SUPPORTED_VERSIONS)},
        )


def _parse_job_type(job_type: Any) -> str:
    if job_type not in SUPPORTED_JOB_TYPES or not isinstance(job_type, str):
        raise invalid_params(
            f"unsupported job_type {js_json(job_type)}",
            detail={
                "reason": "unsupported_job_type",
                "job_type": job_type,
                "supported": list(SUPPORTED_JOB_TYPES),
            },
        )
    return job_type


def _trimmed_string(value: Any, field: str, max_length: int) -> str:
    """A non-blank string, trimmed as JavaScript trims, of at most `max_length` characters."""
    if not isinstance(value, str) or is_blank(value):
        raise invalid_params(f"{field} must be a non-empty string")
    trimmed = js_trim(value)
    if js_length(trimmed) > max_length:
        raise invalid_params(f"{field} must be at most {max_length} characters")
    return trimmed


def _short_string(value: Any, max_length: int) -> bool:
    return isinstance(value, str) and js_length(value) <= max_length


def _parse_labels(labels: Any) -> dict[str, str] | None:
    if labels is None:
        return None
    if not isinstance(labels, dict):
        raise invalid_params("labels must be an object of strings")
    for name, value in labels.items():
        if not isinstance(value, str):
            raise invalid_params(f"labels.{name} must be a string")
    return dict(labels)


def _non_blank_string(value: Any, max_length: int) -> bool:
    return isinstance(value, str) and not is_blank(value) and js_length(value) <= max_length


def parse_candidate_search_params(params: Any) -> CandidateSearchRequest:
    """Validate and normalize `params` (reference §7.1); `target_id` is checked last."""
    if not isinstance(params, dict):
        raise invalid_params("params must be a JSON object")
    normalized: dict[str, Any] = {}
    # In the reference's order: the first failure wins.
    for field, parse in _PARAMS_OBJECTS:
        value = params.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise invalid_params(f"params.{field} must be a JSON object")
        parsed = parse(value)
        if parsed is not None:
            normalized[field] = parsed
    return CandidateSearchRequest(
        params=normalized, target_id=_parse_target_id(params.get("target_id"))
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
        if not _non_blank_string(account, MAX_ACCOUNT_LENGTH):
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
    if not all(_non_blank_string(tag, MAX_TAG_LENGTH) for tag in tags):
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


# The objects of `params`, each parsed by its own rules (None: nothing to keep).
_PARAMS_OBJECTS: Final[
    tuple[tuple[str, Callable[[dict[str, Any]], dict[str, Any] | None]], ...]
] = (
    ("source", _parse_source),
    ("query", _parse_query),
    ("constraints", _parse_constraints),
)


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
        if not _non_blank_string(item_id, MAX_EXCLUDE_ID_LENGTH):
            raise invalid_params("params.constraints.exclude[].id must be a non-empty string")
        normalized.append({"kind": kind, "id": js_trim(item_id)})
    return normalized


def _parse_target_id(target_id: Any) -> str | None:
    if target_id is None:
        return None
    return _trimmed_string(target_id, "params.target_id", MAX_TARGET_ID)
