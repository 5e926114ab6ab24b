"""Pages bounded by bytes (protocol/pages.py): every answer fits in a Lambda response."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.domain import StoredEvent
from jobstream.http.api import json_response
from jobstream.protocol.events import EventKind
from jobstream.protocol.pages import MAX_PAGE_BYTES, MAX_RESPONSE_BYTES, fill_page, response_bytes
from tests.support import shown
from tests.support.fat import AT, admitted_at_budget, fattest, result_of
from tests.support.validation import validate

json_documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def runtime_payload(body: Any) -> str:
    """The response as the python3.11 Lambda runtime sends it (ASCII-escaped JSON)."""
    return json.dumps(json_response(200, body))


@given(st.lists(json_documents, max_size=5))
def test_response_bytes_is_what_each_document_adds_to_the_lambda_response(
    items: list[Any],
) -> None:
    empty = len(runtime_payload({"items": []}))
    total = len(runtime_payload({"items": items}))
    commas = max(0, len(items) - 1)
    assert total == empty + sum(response_bytes(item) for item in items) + commas


def test_escaping_twice_is_counted() -> None:
    # é: 2 bytes of UTF-8, \u00e9 once the runtime escapes it; a quote is \" then \\\".
    assert response_bytes("é") == len('\\"\\u00e9\\"')
    assert response_bytes('"') == len('\\"\\\\\\"\\"')


def _numbered(count: int, size: int) -> Iterator[dict[str, str]]:
    for index in range(count):
        yield {"n": str(index), "pad": "x" * size}


def test_a_page_stops_at_its_count() -> None:
    taken, cut = fill_page(_numbered(5, 10), lambda item: item, max_count=3)
    assert [item["n"] for item, _ in taken] == ["0", "1", "2"]
    assert cut
    taken, cut = fill_page(_numbered(3, 10), lambda item: item, max_count=3)
    assert len(taken) == 3
    assert not cut


def test_a_page_stops_before_the_document_that_would_not_fit() -> None:
    one = response_bytes(next(_numbered(1, 100))) + 1
    taken, cut = fill_page(_numbered(10, 100), lambda item: item, max_bytes=3 * one)
    assert len(taken) == 3
    assert cut
    taken, cut = fill_page(_numbered(10, 100), lambda item: item, max_bytes=3 * one - 1)
    assert len(taken) == 2


def test_the_first_document_always_goes_in_and_nothing_after_the_cut_is_read() -> None:
    read: list[str] = []

    def items() -> Iterator[dict[str, str]]:
        for item in _numbered(10, 1000):
            read.append(item["n"])
            yield item

    taken, cut = fill_page(items(), lambda item: item, max_bytes=10)
    assert [item["n"] for item, _ in taken] == ["0"]
    assert cut
    assert read == ["0", "1"]


def test_documents_rendered_as_none_are_not_shown() -> None:
    taken, cut = fill_page(
        _numbered(4, 1), lambda item: None if item["n"] in {"0", "2"} else item, max_count=2
    )
    assert [item["n"] for item, _ in taken] == ["1", "3"]
    assert not cut


@pytest.mark.parametrize(("label_filler", "result_filler"), [("é", "\x01"), ('"', '"')])
def test_the_largest_job_and_event_fit_in_one_response(
    label_filler: str, result_filler: str
) -> None:
    """The job at every budget (labels, result), made of the characters that grow most when
    escaped twice: one Job, and its terminal Event (labels and result twice), each fit."""
    job = fattest(
        admitted_at_budget(label_filler),
        result=result_of(filler=result_filler),
    )
    job_document = shown.job_document(job, AT)
    validate(job_document, "Job")
    terminal = StoredEvent(job.job_id, 4, EventKind.OUTCOME_SUCCEEDED.value, AT)
    event_document = shown.event_document(job, terminal, AT)
    assert event_document is not None
    for document in (job_document, event_document, {"job": job_document}):
        assert len(runtime_payload(document)) < MAX_PAGE_BYTES < MAX_RESPONSE_BYTES
    page = shown.event_page(job, [terminal], has_more=False, now=AT)
    assert len(runtime_payload(page)) < MAX_RESPONSE_BYTES


def test_an_event_page_is_cut_by_bytes_and_says_where_to_go_on() -> None:
    job = admitted_at_budget("é")
    events = [
        StoredEvent(job.job_id, sequence, EventKind.PROGRESSED.value, AT + sequence)
        for sequence in range(1, 30)
    ]
    page = shown.event_page(job, events, has_more=False, now=AT)
    listed = page["events"]
    assert 1 <= len(listed) < len(events)
    assert page["next_after"] == listed[-1]["event_id"]
    assert len(runtime_payload(page)) <= MAX_RESPONSE_BYTES
    validate(page, "EventPage")
