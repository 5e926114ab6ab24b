"""Task validation, in the reference order with the reference messages.

Pure: takes the decoded JSON body and the registered job types' params parsers, returns an
AdmissionRequest or raises ProtocolError (HTTP 400). A job type's own params are validated by
its parser (`jobstream.jobtypes`); this module knows no job type by name.
"Absent" means missing or JSON null throughout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from jobstream.protocol.errors import ErrorCode, ProtocolError, invalid_params
from jobstream.protocol.js import is_blank, is_js_integer, js_json, js_length, js_trim

PROTOCOL_VERSION: Final = "1"
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)

MAX_IDEMPOTENCY_KEY: Final = 200
MAX_CORRELATION_ID: Final = 200
MAX_CALLBACK_URL: Final = 2000
MIN_DEADLINE_MS: Final = 1000
MAX_TARGET_ID: Final = 200
# Number.MAX_SAFE_INTEGER: the largest integer every JSON consumer holds exactly.
MAX_SAFE_INTEGER: Final = 2**53 - 1


@dataclass(frozen=True, slots=True)
class ParsedParams:
    """A Task's params as its job type validated them: the normalized params (stored, and
    compared on replay) and the target selector lifted out of them."""

    params: dict[str, Any]
    target_id: str | None = None

    @property
    def canonical(self) -> str:
        """The idempotency comparison form: key order fixed by normalization, list order kept."""
        return json.dumps(self.params, ensure_ascii=False, separators=(",", ":"))


ParamsParser = Callable[[Any], ParsedParams]


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """A validated Task."""

    job_type: str
    idempotency_key: str
    correlation_id: str | None
    labels: dict[str, str] | None
    callback_url: str | None
    deadline_ms: int | None
    parsed: ParsedParams


def _absent(body: dict[str, Any], key: str) -> bool:
    return body.get(key) is None


def parse_task(body: Any, job_types: Mapping[str, ParamsParser]) -> AdmissionRequest:
    """Validate a Task body in the reference order; the first failure wins. `job_types` are
    the registered types' params parsers, by name."""
    if not isinstance(body, dict):
        raise invalid_params("body must be a JSON object")
    _check_protocol_version(body)
    job_type = _parse_job_type(body.get("job_type"), job_types)
    key = parse_idempotency_key(body.get("idempotency_key"))
    correlation_id = body.get("correlation_id")
    if correlation_id is not None and (
        not isinstance(correlation_id, str) or js_length(correlation_id) > MAX_CORRELATION_ID
    ):
        raise invalid_params(
            f"correlation_id must be a string of at most {MAX_CORRELATION_ID} chars"
        )
    callback_url = body.get("callback_url")
    if callback_url is not None and (
        not isinstance(callback_url, str) or js_length(callback_url) > MAX_CALLBACK_URL
    ):
        raise invalid_params(f"callback_url must be a string of at most {MAX_CALLBACK_URL} chars")
    deadline_ms = body.get("deadline_ms")
    if deadline_ms is not None and (
        not is_js_integer(deadline_ms) or deadline_ms < MIN_DEADLINE_MS
    ):
        raise invalid_params(f"deadline_ms must be an integer of at least {MIN_DEADLINE_MS} ms")
    labels = _parse_labels(body.get("labels"))
    parsed = job_types[job_type](body.get("params"))
    return AdmissionRequest(
        job_type=job_type,
        idempotency_key=key,
        # An empty correlation id is accepted and means "no correlation".
        correlation_id=correlation_id or None,
        labels=labels,
        # An empty callback URL is accepted and means "no callback".
        callback_url=callback_url or None,
        deadline_ms=int(deadline_ms) if deadline_ms is not None else None,
        parsed=parsed,
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


def _parse_job_type(job_type: Any, job_types: Mapping[str, ParamsParser]) -> str:
    if not isinstance(job_type, str) or job_type not in job_types:
        raise invalid_params(
            f"unsupported job_type {js_json(job_type)}",
            detail={
                "reason": "unsupported_job_type",
                "job_type": job_type,
                "supported": list(job_types),
            },
        )
    return job_type


def parse_idempotency_key(value: Any) -> str:
    """The key jobs are known by: trimmed, at most MAX_IDEMPOTENCY_KEY characters."""
    return _trimmed_string(value, "idempotency_key", MAX_IDEMPOTENCY_KEY)


def _parse_labels(labels: Any) -> dict[str, str] | None:
    if labels is None:
        return None
    if not isinstance(labels, dict):
        raise invalid_params("labels must be an object of strings")
    for name, value in labels.items():
        if not isinstance(value, str):
            raise invalid_params(f"labels.{name} must be a string")
    return dict(labels)


def non_blank_string(value: Any, max_length: int) -> bool:
    return isinstance(value, str) and not is_blank(value) and js_length(value) <= max_length


def parse_target_id(target_id: Any) -> str | None:
    if target_id is None:
        return None
    return _trimmed_string(target_id, "params.target_id", MAX_TARGET_ID)


def _trimmed_string(value: Any, name: str, max_length: int) -> str:
    """A non-blank string, trimmed as JavaScript trims, of at most `max_length` characters."""
    if not isinstance(value, str) or is_blank(value):
        raise invalid_params(f"{name} must be a non-empty string")
    trimmed = js_trim(value)
    if js_length(trimmed) > max_length:
        raise invalid_params(f"{name} must be at most {max_length} characters")
    return trimmed
