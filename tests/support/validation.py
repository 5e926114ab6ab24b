"""Validate produced documents against our own schemas and, where present, the published one."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

# Consumer business words no published key may contain (reference §8 items 7 and 18): the
# conformance kit's list, so the tests and the kit judge by the same words.
from jobstream_conformance.summary import BUSINESS_TERMS

REPOSITORY = Path(__file__).resolve().parents[2]
OUR_SCHEMA = REPOSITORY / "schemas" / "jobstream.schema.json"
SHARED_PROTOCOL = REPOSITORY.parent / "shared" / "protocol" / "v1"
PUBLISHED_SCHEMA = SHARED_PROTOCOL / "protocol.schema.json"
FIXTURES = SHARED_PROTOCOL / "fixtures"


@cache
def _validator(schema_path: Path, definition: str) -> Draft202012Validator | None:
    if not schema_path.exists():
        return None
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    if definition not in schema.get("$defs", {}):
        return None
    resource = Resource.from_contents(schema)
    registry: Registry = Registry().with_resource(schema.get("$id", "urn:schema"), resource)
    wrapper = {"$ref": f"{schema.get('$id', 'urn:schema')}#/$defs/{definition}"}
    return Draft202012Validator(wrapper, registry=registry)


def validate(document: Any, definition: str) -> None:
    """Raise if `document` is not a valid `definition` under our schema or the published one."""
    checked = 0
    for path in (OUR_SCHEMA, PUBLISHED_SCHEMA):
        validator = _validator(path, definition)
        if validator is None:
            continue
        errors = sorted(validator.iter_errors(document), key=lambda error: list(error.path))
        if errors:
            details = "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
            raise AssertionError(f"{path.name} rejects {definition}: {details}")
        checked += 1
    assert checked, f"no schema defines {definition}"


def validate_error(document: Any) -> None:
    """An error body: exactly `{"error": <Error>}`."""
    assert set(document) == {"error"}, document
    validate(document["error"], "Error")
    assert isinstance(document["error"]["retryable"], bool)


def keys_of(document: Any) -> set[str]:
    """Every object key anywhere in a JSON document."""
    found: set[str] = set()
    if isinstance(document, dict):
        for name, value in document.items():
            found.add(name)
            found |= keys_of(value)
    elif isinstance(document, list):
        for item in document:
            found |= keys_of(item)
    return found


def business_keys(document: Any) -> list[str]:
    return sorted(k for k in keys_of(document) if any(t in k.lower() for t in BUSINESS_TERMS))
