"""The listing cursor: where a listing stopped (the start key that resumes it), as an opaque
URL-safe string, and read back only when it is shaped like one the listing issued."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

from jobstream.store import keys

# Where a listing stopped: the key of the last index entry it read. Opaque outside the store:
# the services hand it from a listing to its cursor and from a cursor to the next query.
StartKey: TypeAlias = dict[str, Any]


def encode_cursor(start_key: Mapping[str, Any]) -> str:
    raw = json.dumps(start_key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_JOB_ID: Final = r"job_[A-Za-z0-9_-]{32}"
# Exactly the keys of a job row we could have returned as LastEvaluatedKey. A cursor is the
# client's text: anything else (another shape, a key too long for DynamoDB, text that is not
# UTF-8) must be a 400, never a request DynamoDB refuses.
_CREATED_SK: Final = re.compile(rf"[0-9]{{{keys.TIME_WIDTH}}}#({_JOB_ID})")
_CURSOR_VALUES: Final[dict[str, re.Pattern[str]]] = {
    keys.PK: re.compile(rf"JOB#({_JOB_ID})"),
    keys.SK: re.compile(re.escape(keys.JOB_SK)),
    "gsi1sk": _CREATED_SK,
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
        job_ids.update(match.groups())
    # Every key names the same job.
    return value if len(job_ids) <= 1 else None
