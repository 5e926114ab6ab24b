"""HTTP validators and freshness (RFC 9110 §8.8, §13.1.2; RFC 9111 §5.2): entity tags of bytes,
If-None-Match evaluated against the current tag, a Cache-Control value. Pure: no I/O, no routes."""

from __future__ import annotations

import hashlib
import re
from typing import Final

# One entity-tag of a list: an optional weak prefix and a quoted opaque tag (etagc excludes
# the double quote and nothing else visible, so a comma may sit inside the quotes).
_ENTITY_TAG: Final = re.compile(r'\s*(?:W/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|$)')
# Half of a SHA-256 in hex: plenty to tell versions of one document apart, shorter on the wire.
_TAG_HEX_CHARS: Final = 32


def strong_etag(data: bytes) -> str:
    """A strong validator of exactly these bytes: '"<hash>"'."""
    return '"' + hashlib.sha256(data).hexdigest()[:_TAG_HEX_CHARS] + '"'


def weak_etag(data: bytes) -> str:
    """A weak validator ('W/"<hash>"'): `data` is what stays the same while the representation
    is equivalent, not every byte of it."""
    return "W/" + strong_etag(data)


def private_max_age(seconds: int) -> str:
    """Cache-Control of an answer one client may reuse for `seconds`, never a shared cache
    (the answer is behind a token)."""
    return f"private, max-age={seconds}"


def if_none_match_matches(field_value: str | None, current_etag: str) -> bool:
    """Whether an If-None-Match field value names the current representation (RFC 9110
    §13.1.2): '*', or a list holding a tag equal to `current_etag` by weak comparison (the
    opaque tags equal, either or both weak). An absent or malformed field matches nothing, so
    the request gets the whole answer."""
    if field_value is None:
        return False
    if field_value.strip() == "*":
        return True
    current = _opaque_tag(current_etag)
    return current is not None and current in _opaque_tags(field_value)


def _opaque_tags(field_value: str) -> set[str]:
    tags: set[str] = set()
    position = 0
    while position < len(field_value):
        found = _ENTITY_TAG.match(field_value, position)
        if found is None or found.end() == position:
            # Not an entity-tag list: the whole field is ignored rather than half read.
            return set()
        tags.add(found.group(1))
        position = found.end()
    return tags


def _opaque_tag(etag: str) -> str | None:
    found = _ENTITY_TAG.fullmatch(etag)
    return found.group(1) if found is not None else None
