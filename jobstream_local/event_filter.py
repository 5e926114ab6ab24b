"""Lambda's event filtering, the subset of its patterns the template uses: value lists, `prefix`,
`exists`, nested objects. Lambda matches a record's leaves only (an object is no value), so
`exists` on an intermediate node sees nothing there.

Standard library only: the local stack's stream poller (jobstream_local/streams.py) and the
rehearsal's emulator (rehearsal/emulator_main.py, in its own virtualenv) apply the same rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def matches(pattern: Any, value: Any, present: bool = True) -> bool:
    """Whether `value` (absent when not `present`) matches one Lambda event filter pattern."""
    if isinstance(pattern, Mapping):
        # Below a missing object every leaf is missing too (`exists: false` holds there).
        fields = value if present and isinstance(value, Mapping) else {}
        return all(
            matches(inner, fields.get(name), name in fields) for name, inner in pattern.items()
        )
    if isinstance(pattern, list):
        return any(_matches_one(choice, value, present) for choice in pattern)
    raise ValueError(f"unsupported filter pattern {pattern!r}")


def _matches_one(choice: Any, value: Any, present: bool) -> bool:
    # Lambda matches a record's leaves only: an object (a DynamoDB attribute's {"N": ...}) is no
    # value, so `exists` on an intermediate node sees nothing there ({"exists": false} holds).
    leaf = present and not isinstance(value, Mapping)
    if isinstance(choice, Mapping):
        if "exists" in choice:
            return bool(choice["exists"]) == leaf
        if "prefix" in choice:
            return leaf and isinstance(value, str) and value.startswith(choice["prefix"])
        raise ValueError(f"unsupported filter rule {choice!r}")
    return leaf and value == choice


def passes(filters: Sequence[Mapping[str, Any]], record: Mapping[str, Any]) -> bool:
    """A record passes when there are no filters or any one pattern matches it."""
    return not filters or any(matches(json.loads(f["Pattern"]), record) for f in filters)
