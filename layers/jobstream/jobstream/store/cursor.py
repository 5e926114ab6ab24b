"""The listing cursor: where a listing stopped (the start key that resumes it), as an opaque
URL-safe string, and read back only when it is shaped like one the listing issued."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

from jobstream.store import keys, listed

# Where a listing stopped: the key of the last index entry it read. Opaque outside the store:
# the services hand it from a listing to its cursor and from a cursor to the next query.
StartKey: TypeAlias = dict[str, Any]


def encode_cursor(start_key: Mapping[str, Any]) -> str:
    raw = json.dumps(start_key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_JOB_ID: Final = keys.JOB_ID_PATTERN
# Exactly the keys of a job row we could have returned as LastEvaluatedKey. A cursor is the
# client's text: anything else (another shape, a key too long for DynamoDB, text that is not
# UTF-8) must be a 400, never a request DynamoDB refuses.
_CREATED_SK: Final = re.compile(rf"[0-9]{{{keys.TIME_WIDTH}}}#({_JOB_ID})")
# A listing of the tenant's index may stop on a succeeded job's result entry (its own item,
# `#RESULT`, sorted just after its job: store/listed.py); the next page starts at the job.
_RESULT_ENTRY_SK: Final = re.compile(
    rf"[0-9]{{{keys.TIME_WIDTH}}}#({_JOB_ID}){re.escape(listed.RESULT_SUFFIX)}"
)
_CURSOR_VALUES: Final[dict[str, re.Pattern[str]]] = {
    keys.PK: re.compile(rf"JOB#({_JOB_ID})"),
    keys.SK: re.compile(rf"{re.escape(keys.JOB_SK)}|{re.escape(keys.RESULT_SK)}"),
    "gsi1sk": re.compile(rf"{_CREATED_SK.pattern}|{_RESULT_ENTRY_SK.pattern}"),
    "gsi2sk": _CREATED_SK,
}


def decode_cursor(cursor: str) -> StartKey | None:
    """The start key a cursor carries, or None when it is not one we issued."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, binascii.Error):
        return None
    if not isinstance(value, dict) or not value or not set(value) <= set(_CURSOR_VALUES):
        return None
    job_ids: set[str] = set()
    for name, item in value.items():
        match = _CURSOR_VALUES[name].fullmatch(item) if isinstance(item, str) else None
        if match is None:
            return None
        job_ids.update(group for group in match.groups() if group)  # the alternative matched
    # Every key names the same job, and a result entry's sort keys are both a result entry's.
    on_result = value.get(keys.SK) == keys.RESULT_SK
    if on_result != bool(_RESULT_ENTRY_SK.fullmatch(str(value.get("gsi1sk", "")))):
        return None
    return value if len(job_ids) <= 1 else None
