"""Marshalling between Python values and DynamoDB attribute values (small, fast, exact for ints)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final


def to_attribute(value: Any) -> dict[str, Any]:
    if isinstance(value, frozenset | set):
        return {"SS": sorted(value)}
    if isinstance(value, Mapping):
        return {"M": to_item(value)}
    if isinstance(value, list | tuple):
        return {"L": [to_attribute(item) for item in value]}
    return _scalar_attribute(value)


def _scalar_attribute(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, float):
        return {"N": repr(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes):
        return {"B": value}
    raise TypeError(f"cannot store a {type(value).__name__}")


def to_item(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: to_attribute(value) for name, value in values.items()}


def from_attribute(attribute: Mapping[str, Any]) -> Any:
    ((tag, value),) = attribute.items()
    if tag == "N":
        return int(value) if value.lstrip("-").isdigit() else float(value)
    if tag == "M":
        return from_item(value)
    if tag == "L":
        return [from_attribute(item) for item in value]
    reader = _SCALAR_READERS.get(tag)
    if reader is None:
        raise TypeError(f"unsupported attribute type {tag}")
    return reader(value)


_SCALAR_READERS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "S": str,
    "BOOL": bool,
    "NULL": lambda _: None,
    "SS": frozenset,
    "B": bytes,
}


def from_item(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {name: from_attribute(attribute) for name, attribute in item.items()}
