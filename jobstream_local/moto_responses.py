"""Make moto's DynamoDB answers cost what writing their JSON costs.

moto builds every answer by walking the operation's output shape member by member, looking each
value up under several spellings. A DynamoDB item is already in its wire form when moto answers
with it (`{"S": "..."}`, `{"M": {...}}`: what `Item.to_json()` gives), yet every attribute value
of every item went through that walk: a third of moto's time in the local stack, spent copying
items into identical items. Here an attribute value (and a map of them) that holds only the wire
form's own tags and JSON's own types is written as it is; anything else (binary values, another
shape, a value of a type the walk would convert) takes moto's walk, unchanged. And the names of a
handler class's methods, which moto lists with `inspect.getmembers` on every request to find the
action's method, are listed once per class (again if the class gains an attribute).
"""

from __future__ import annotations

import functools
from typing import Any, Final

_PATCHED: Final = "_jobstream_plain_attribute_values"
ATTRIBUTE_VALUE: Final = "AttributeValue"
# The tags whose values JSON carries as they are (binary values are base64-encoded by the walk).
_STRING_TAGS: Final = frozenset({"S", "N"})
_BOOLEAN_TAGS: Final = frozenset({"BOOL", "NULL"})
_SET_TAGS: Final = frozenset({"SS", "NS"})


def plain_attribute_value(value: Any) -> bool:
    """Whether `value` is an attribute value in wire form that moto's walk would copy as is."""
    if type(value) is not dict or len(value) != 1:
        return False
    ((tag, inner),) = value.items()
    if tag in _STRING_TAGS:
        return type(inner) is str
    if tag in _BOOLEAN_TAGS:
        return type(inner) is bool
    if tag in _SET_TAGS:
        return type(inner) is list and all(type(member) is str for member in inner)
    if tag == "M":
        return plain_attribute_map(inner)
    if tag == "L":
        return type(inner) is list and all(plain_attribute_value(member) for member in inner)
    return False


def plain_attribute_map(value: Any) -> bool:
    return type(value) is dict and all(
        type(name) is str and plain_attribute_value(member) for name, member in value.items()
    )


def _value_shape(shape: Any) -> Any:
    return getattr(getattr(shape, "value", None), "name", None)


def _list_methods_once() -> None:
    from moto.core import responses

    list_methods = responses.method_names_from_class  # type: ignore[attr-defined]

    @functools.lru_cache(maxsize=256)
    def listed(clazz: Any, _attributes: int) -> tuple[str, ...]:
        return tuple(list_methods(clazz))

    def method_names_from_class(clazz: Any) -> list[str]:
        return list(listed(clazz, len(vars(clazz))))

    responses.moto_method_names_from_class = list_methods  # type: ignore[attr-defined]
    responses.method_names_from_class = method_names_from_class  # type: ignore[attr-defined]


def make_responses_cheap() -> None:
    from moto.core.serialize import BaseJSONSerializer

    if getattr(BaseJSONSerializer, _PATCHED, False):
        return
    _list_methods_once()
    walk_structure = BaseJSONSerializer._serialize_type_structure
    walk_map = BaseJSONSerializer._serialize_type_map

    def serialize_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == ATTRIBUTE_VALUE and plain_attribute_value(value):
            self._default_serialize(serialized, value, shape, key)
            return
        walk_structure(self, serialized, value, shape, key)

    def serialize_map(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if _value_shape(shape) == ATTRIBUTE_VALUE and plain_attribute_map(value):
            self._default_serialize(serialized, value, shape, key)
            return
        walk_map(self, serialized, value, shape, key)

    BaseJSONSerializer.moto_serialize_type_structure = walk_structure  # type: ignore[attr-defined]  # kept for comparison
    BaseJSONSerializer.moto_serialize_type_map = walk_map  # type: ignore[attr-defined]
    BaseJSONSerializer._serialize_type_structure = serialize_structure  # type: ignore[method-assign]
    BaseJSONSerializer._serialize_type_map = serialize_map  # type: ignore[method-assign]
    setattr(BaseJSONSerializer, _PATCHED, True)
