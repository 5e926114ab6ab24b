"""DynamoDB's item limits as the store and the local stack apply them (item sizes by AWS's rules
are checked in test_billing.py): which numbers DynamoDB stores."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.store.codec import to_attribute
from jobstream.store.item_size import (
    MAX_ITEM_BYTES,
    first_number_refusal,
    item_size,
    number_refusal,
)


@pytest.mark.parametrize(
    "text",
    [
        "0",
        "-0",
        "0.0",
        "1",
        "-1",
        "9" * 38,  # 38 significant digits
        "1" + "0" * 125,  # 1E+125: trailing zeros are not significant
        "9.9999999999999999999999999999999999999E+125",
        "1E-130",
        "-1E-130",
        "0.000012",
        "1e+125",
        repr(2.0**53),
    ],
)
def test_numbers_dynamodb_stores(text: str) -> None:
    assert number_refusal(text) is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1" * 39, "more than 38 significant digits"),
        ("12345678901234567890123456789012345678901", "more than 38 significant digits"),
        ("1.00000000000000000000000000000000000001", "more than 38 significant digits"),
        ("1e+126", "magnitude larger than supported range"),
        ("1e+300", "magnitude larger than supported range"),
        (str(int(1e300)), "more than 38 significant digits"),  # the float's binary digits
        ("1" + "0" * 126, "magnitude larger than supported range"),
        ("-1e+126", "magnitude larger than supported range"),
        ("1e-131", "magnitude smaller than supported range"),
        ("nan", "not a number"),
        ("Infinity", "not a number"),
        ("", "not a number"),
    ],
)
def test_numbers_dynamodb_refuses(text: str, why: str) -> None:
    assert number_refusal(text) == why


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_a_number_is_refused_exactly_when_out_of_precision_or_range(value: Decimal) -> None:
    text = str(value)
    digits = "".join(map(str, value.as_tuple().digits)).strip("0")
    storable = value.is_zero() or (len(digits) <= 38 and -130 <= value.adjusted() <= 125)
    assert (number_refusal(text) is None) == storable


def test_numbers_are_found_at_any_depth_of_a_request() -> None:
    deep: object = to_attribute(1)
    for _ in range(5_000):  # deeper than Python may recurse
        deep = {"L": [deep]}
    assert first_number_refusal({"Item": {"a": deep}}) is None
    bad: object = to_attribute(10**200)
    for _ in range(5_000):
        bad = {"M": {"x": bad}}
    assert first_number_refusal({"Item": {"a": bad}}) == "magnitude larger than supported range"
    assert first_number_refusal({"x": {"NS": ["1", "1e200"]}}) is not None
    # A string that merely holds digits is not a number.
    assert first_number_refusal({"Item": {"a": {"S": "1e200"}}}) is None


def test_an_item_of_exactly_400_kib_is_the_largest() -> None:
    base = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    room = MAX_ITEM_BYTES - item_size(base) - len("x")
    assert item_size({**base, "x": {"S": "a" * room}}) == MAX_ITEM_BYTES
