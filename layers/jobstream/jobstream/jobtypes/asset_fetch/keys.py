"""Where an asset is stored: its object key in the asset bucket. Pure: admission (params.py)
refuses an asset id whose key S3 would refuse before anything is written or downloaded."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

# The prefix the bucket's lifecycle rule expires.
PREFIX: Final = "jobs/"
# S3's limit on an object key, in bytes of UTF-8.
MAX_KEY_BYTES: Final = 1024
# Every job id's length: "job_" and 32 URL-safe base64 characters (lifecycle/identity.py;
# tests/unit/test_asset_fetch.py holds the two together).
JOB_ID_LENGTH: Final = 36
# An asset's position in its job, written with two digits (a job fetches at most 20).
POSITION_DIGITS: Final = 2


def object_key(job_id: str, index: int, asset_id: str) -> str:
    """The job's prefix (lifecycle expiry), then position and the asset id made key-safe."""
    return f"{PREFIX}{job_id}/{index:0{POSITION_DIGITS}d}-{quote(asset_id, safe='')}"


def longest_key_bytes(asset_id: str) -> int:
    """The bytes of the longest key `asset_id` makes, in any job at any position."""
    longest = object_key("j" * JOB_ID_LENGTH, 10**POSITION_DIGITS - 1, asset_id)
    return len(longest.encode("utf-8"))
