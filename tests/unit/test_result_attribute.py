"""A result is kept as its compressed JSON and read back exactly; one kept as a map still reads."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jobstream.store.codec import to_attribute
from jobstream.store.results import from_result_attribute, to_result_attribute

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_a_result_reads_back_exactly(result: dict[str, Any]) -> None:
    attribute = to_result_attribute(result)
    assert set(attribute) == {"B"}
    assert from_result_attribute(attribute) == result


def test_a_result_kept_as_a_map_still_reads() -> None:
    result = {"candidates": [{"candidate_id": "pixiv:1", "weight": 1.5}], "scanned": 3}
    assert from_result_attribute(to_attribute(result)) == result


def test_a_result_takes_far_less_room_compressed() -> None:
    candidate = {
        "candidate_id": "pixiv:129438145",
        "platform": "pixiv",
        "work_id": "129438145",
        "work_type": "illustration",
        "url": "https://www.pixiv.net/artworks/129438145",
    }
    result = {"candidates": [dict(candidate, work_id=str(n)) for n in range(20)], "scanned": 20}
    assert len(to_result_attribute(result)["B"]) * 3 < len(str(result))
