"""How a succeeded job's result is kept in its item (`#RESULT`): its JSON, compressed.

A result is the protocol's JSON and is read back whole, never by parts: kept as a DynamoDB map it
would bill its every key and nesting, and the more a result repeats itself (many candidates), the
less its compressed text takes (a 1-candidate result: about 1,090 bytes as JSON, 900 as a map,
400 compressed; a 20-candidate one: 13.6 KB as a map, 1.6 KB compressed). Every write and read of
the item, and its listing entry (store/listed.py), are billed on that size. A result written
as a map (before results were compressed) still reads.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any, Final

from jobstream.store.codec import from_attribute

ATTRIBUTE: Final = "result"
# zlib's default trade: a result is compressed once, when its run ends.
_LEVEL: Final = 6


def to_result_attribute(result: Mapping[str, Any]) -> dict[str, bytes]:
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return {"B": zlib.compress(text.encode("utf-8"), _LEVEL)}


def from_result_attribute(attribute: Mapping[str, Any]) -> dict[str, Any]:
    if "B" in attribute:
        result: dict[str, Any] = json.loads(zlib.decompress(attribute["B"]))
        return result
    stored: dict[str, Any] = from_attribute(attribute)
    return stored
