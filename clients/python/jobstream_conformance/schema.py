"""The kit's copy of the published protocol (see protocol/v1/PROVENANCE.md) and validation
against it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

# The published files' hashes; a copy that differs is refused rather than trusted.
PUBLISHED: Final = {
    "protocol.schema.json": "a441550f3e39135de0c13dedd1b55d4865d6fce5dfa25b4fe2c83c321661e012",
    "error-mapping.json": "05b2472587a97e0cd66e14c548fad53eb57122b417e89f5424fa63eacae8bfa2",
}


class VendoredCopyError(RuntimeError):
    """The packaged protocol files are not the published ones."""


def _read(name: str) -> bytes:
    return resources.files("jobstream_conformance").joinpath("protocol", "v1", name).read_bytes()


@cache
def vendored(name: str) -> Any:
    """A published file, checked against its recorded sha256."""
    data = _read(name)
    digest = hashlib.sha256(data).hexdigest()
    if digest != PUBLISHED[name]:
        raise VendoredCopyError(f"{name}: sha256 {digest} is not the published {PUBLISHED[name]}")
    return json.loads(data)


@dataclass(frozen=True)
class Protocol:
    schema: dict[str, Any]
    mapping: dict[str, Any]

    @property
    def error_codes(self) -> frozenset[str]:
        return frozenset(self.schema["$defs"]["Error"]["properties"]["code"]["enum"])

    def default_retryable(self, code: str) -> bool | None:
        entry = self.mapping["protocol_codes"].get(code)
        return bool(entry["retryable"]) if entry is not None else None

    def errors(self, document: Any, definition: str) -> list[str]:
        """What makes `document` an invalid `definition` (empty when it is valid)."""
        found = sorted(
            _validator(definition).iter_errors(document), key=lambda error: list(error.path)
        )
        return [f"{'/'.join(map(str, error.path)) or '(root)'}: {error.message}" for error in found]


@cache
def protocol() -> Protocol:
    return Protocol(vendored("protocol.schema.json"), vendored("error-mapping.json"))


@cache
def _validator(definition: str) -> Draft202012Validator:
    schema = vendored("protocol.schema.json")
    if definition not in schema["$defs"]:
        raise KeyError(f"the protocol schema defines no {definition}")
    registry: Registry = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{definition}"}, registry=registry)


def self_check() -> str:
    """Evidence that the copy is the published one and all its references resolve."""
    schema = vendored("protocol.schema.json")
    vendored("error-mapping.json")
    Draft202012Validator.check_schema(schema)
    references = _references(schema)
    for reference in references:
        name = reference.removeprefix("#/$defs/")
        if name not in schema["$defs"]:
            raise VendoredCopyError(f"unresolved $ref {reference}")
    codes = set(vendored("error-mapping.json")["protocol_codes"])
    if codes != set(protocol().error_codes):
        raise VendoredCopyError("error-mapping codes differ from the schema's Error.code enum")
    return (
        f"sha256 of both files as published; {len(schema['$defs'])} definitions, "
        f"{len(references)} $refs resolved, {len(codes)} error codes"
    )


def _references(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        for value in node.values():
            found += _references(value)
        return found
    if isinstance(node, list):
        return [reference for value in node for reference in _references(value)]
    return []
