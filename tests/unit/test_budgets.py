"""The size budgets (store/budgets.py): the largest job the rules allow fits in one item."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from jobstream.http.request import MAX_BODY_BYTES
from jobstream.store import keys
from jobstream.store.budgets import (
    ADMITTED_JOB_BYTES,
    GROWTH_BYTES,
    MAX_MESSAGE_CHARS,
    RESULT_BYTES,
    admitted_job_size,
    clip,
    clip_bytes,
    result_fits,
    result_size,
    unstorable_number,
)
from jobstream.store.codec import to_attribute
from jobstream.store.item_size import MAX_ITEM_BYTES, item_size
from jobstream.store.jobs import record_to_item
from tests.support.fat import admitted_at_budget, fattest, result_of


def test_the_budgets_split_one_item() -> None:
    assert ADMITTED_JOB_BYTES + GROWTH_BYTES <= MAX_ITEM_BYTES == 409_600
    assert RESULT_BYTES <= MAX_ITEM_BYTES
    # Room for every body the API accepts, and for what the item adds to it.
    assert ADMITTED_JOB_BYTES == MAX_BODY_BYTES + 4 * 1024 == 260 * 1024
    assert GROWTH_BYTES == 16 * 1024


@pytest.mark.parametrize("filler", ["x", "é", '"', "\x01", "\U0001f600"])
def test_the_fattest_job_the_budgets_allow_fits_in_one_item(filler: str) -> None:
    """Admitted at its budget, then every later attribute at its largest, and the attributes
    other streams add (sweep keys, retention): within its budgets; and its result at its
    budget, in an item of its own, fits too."""
    admitted = admitted_at_budget(filler)
    assert admitted_job_size(admitted) == ADMITTED_JOB_BYTES
    fat = fattest(admitted, result=result_of(RESULT_BYTES, filler))
    item = record_to_item(fat, previous_formats=True)  # the larger shape: its correlation entry
    assert "result" not in item  # the result has an item of its own
    item.setdefault("sweep_pk", to_attribute(keys.SweepBacklog.ACTIVE_JOBS.value))
    item.setdefault("sweep_sk", to_attribute(keys.sweep_sk(10**13 - 1, "j" * 40)))
    item[keys.TTL_ATTRIBUTE] = to_attribute(10**10)
    grown = item_size(item) - ADMITTED_JOB_BYTES
    assert 0 < grown <= GROWTH_BYTES, grown
    assert fat.result is not None
    result_item = {
        keys.PK: to_attribute(keys.job_pk(fat.job_id)),
        keys.SK: to_attribute(keys.RESULT_SK),
        "job_created_at": to_attribute(10**13),
        "result": to_attribute(fat.result),
        keys.TTL_ATTRIBUTE: to_attribute(10**10),
    }
    assert item_size(result_item) - result_size(fat.result) < 200
    assert item_size(result_item) <= MAX_ITEM_BYTES


def test_a_result_fits_up_to_its_budget() -> None:
    assert result_size(result_of(RESULT_BYTES)) == RESULT_BYTES
    assert result_fits(result_of(RESULT_BYTES))
    assert not result_fits(result_of(RESULT_BYTES + 1))


def test_messages_are_clipped() -> None:
    assert clip(None) is None
    assert clip("short") == "short"
    assert clip("m" * MAX_MESSAGE_CHARS) == "m" * MAX_MESSAGE_CHARS
    clipped = clip("m" * (MAX_MESSAGE_CHARS + 1))
    assert clipped is not None
    assert len(clipped) == MAX_MESSAGE_CHARS
    assert clipped.endswith("…")


def test_a_number_dynamodb_cannot_store_is_found_anywhere_in_the_job() -> None:
    job = admitted_at_budget(bytes_=ADMITTED_JOB_BYTES - 1_000)
    assert unstorable_number(job) is None
    huge = replace(job, deadline_at=int(1e300))
    assert unstorable_number(huge) == "more than 38 significant digits"
    assert unstorable_number(replace(job, attempt=10**130)) is not None
    assert unstorable_number(replace(job, attempt=10**125)) is None
    # The params are kept as their canonical text: a number in them is stored as written.
    text = json.dumps({"constraints": {"limit": int(1e300)}, "x": [{"y": 10**130}]})
    assert unstorable_number(replace(job, params_canonical=text)) is None


@pytest.mark.parametrize("filler", ["p", "é", "西", "\U0001f600"])
def test_progress_is_clipped_to_bytes_between_characters(filler: str) -> None:
    limit = 100
    assert clip_bytes(None, limit) is None
    assert clip_bytes(filler * (limit // 4), limit) == filler * (limit // 4)
    clipped = clip_bytes(filler * (limit + 1), limit)
    assert clipped is not None
    assert clipped.endswith("…")
    assert clipped.rstrip("…") == filler * len(clipped.rstrip("…"))  # whole characters only
    assert limit - 4 < len(clipped.encode()) <= limit
