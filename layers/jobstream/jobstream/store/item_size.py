"""DynamoDB's limits on what one item may hold, by AWS's published rules.

Item size: attribute names count; a string is its UTF-8 bytes; a number is 1 byte per two
significant digits plus 1; booleans and null are 1 byte; a list or map is 3 bytes plus its
elements, each element 1 byte more than its own size; a set is the sum of its members. An item
may take at most 400 KB (409,600 bytes).

A number holds at most 38 significant digits, and its magnitude is 0 or lies from 1E-130 up to
(not including) 1E+126; DynamoDB refuses any other with a ValidationException.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

MAX_ITEM_BYTES: Final = 400 * 1024
MAX_NUMBER_DIGITS: Final = 38
# The decimal exponents of the most significant digit DynamoDB stores: 1E-130 to 9.99...E+125.
MIN_NUMBER_EXPONENT: Final = -130
MAX_NUMBER_EXPONENT: Final = 125

AttributeValue = Mapping[str, Any]
Item = Mapping[str, AttributeValue]


def number_size(text: str) -> int:
    digits = text.lstrip("-").replace(".", "").split("e")[0].split("E")[0].strip("0")
    return (max(1, len(digits)) + 1) // 2 + 1


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def _list_size(elements: list[AttributeValue]) -> int:
    return 3 + sum(value_size(element) + 1 for element in elements)


def _map_size(members: Mapping[str, AttributeValue]) -> int:
    return 3 + sum(_utf8_size(name) + value_size(v) + 1 for name, v in members.items())


# The size of each type's content, by its DynamoDB tag (the rules above).
_CONTENT_SIZE: Final[dict[str, Callable[[Any], int]]] = {
    "S": _utf8_size,
    "N": number_size,
    "B": len,
    "BOOL": lambda _: 1,
    "NULL": lambda _: 1,
    "L": _list_size,
    "M": _map_size,
    "SS": lambda members: sum(map(_utf8_size, members)),
    "NS": lambda members: sum(map(number_size, members)),
    "BS": lambda members: sum(map(len, members)),
}


def value_size(value: AttributeValue) -> int:
    ((tag, content),) = value.items()
    size = _CONTENT_SIZE.get(tag)
    if size is None:
        raise ValueError(f"unknown attribute type {tag}")
    return size(content)


def attribute_size(name: str, value: AttributeValue) -> int:
    """What one attribute adds to its item: its name and its value."""
    return len(name.encode("utf-8")) + value_size(value)


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(attribute_size(name, value) for name, value in item.items())


def number_refusal(text: str) -> str | None:
    """Why DynamoDB refuses to store the number `text`, or None when it stores it."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        return "not a number"
    if not value.is_finite():
        return "not a number"
    if value.is_zero():
        return None
    digits = "".join(map(str, value.as_tuple().digits)).strip("0")
    if len(digits) > MAX_NUMBER_DIGITS:
        return f"more than {MAX_NUMBER_DIGITS} significant digits"
    if value.adjusted() > MAX_NUMBER_EXPONENT:
        return "magnitude larger than supported range"
    if value.adjusted() < MIN_NUMBER_EXPONENT:
        return "magnitude smaller than supported range"
    return None


def first_number_refusal(value: Any) -> str | None:
    """Why DynamoDB would refuse some number in a request body (attribute values in their
    typed form, at any depth), or None. Iterative: a body may nest deeply."""
    pending = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, Mapping):
            number = current.get("N")
            if isinstance(number, str) and (refusal := number_refusal(number)) is not None:
                return refusal
            numbers = current.get("NS")
            if isinstance(numbers, list):
                for member in numbers:
                    if isinstance(member, str) and (refusal := number_refusal(member)) is not None:
                        return refusal
            pending.extend(current.values())
        elif isinstance(current, list):
            pending.extend(current)
    return None
