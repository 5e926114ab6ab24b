"""Request bodies as JSON: whatever the nesting, a document or a 400, never another failure."""

from __future__ import annotations

import pytest

from jobstream.http.request import MAX_JSON_DEPTH, Request
from jobstream.http.statuses import http_status
from jobstream.protocol.errors import ProtocolError


def _request(body: bytes) -> Request:
    return Request(
        method="POST",
        route_key="POST /jobs",
        headers={"content-type": "application/json"},
        query={},
        path_parameters={},
        raw_body=body,
        base_url=None,
    )


def test_any_nesting_depth_is_a_document_or_a_400() -> None:
    # Around the interpreter's recursion limit reading may succeed where writing back (or
    # echoing a value in an error) would not: past MAX_JSON_DEPTH every body is refused.
    outcomes: dict[int, tuple[int, str] | str] = {}
    for depth in range(1, 1200):
        try:
            _request(b"[" * depth + b"]" * depth).json_body()
            outcomes[depth] = "document"
        except ProtocolError as error:
            outcomes[depth] = (http_status(error), error.body()["error"]["message"])
    too_deep = (
        400,
        f"request body must nest at most {MAX_JSON_DEPTH} levels of objects and arrays",
    )
    assert {outcomes[depth] for depth in range(1, MAX_JSON_DEPTH + 1)} == {"document"}
    assert set(outcomes.values()) - {"document"} <= {
        too_deep,
        (400, "request body must be valid JSON"),
    }
    assert outcomes[MAX_JSON_DEPTH + 1] == too_deep


@pytest.mark.parametrize(
    ("raw", "text"),
    [(rb'{"a": "\ud83d\ude00"}', "\U0001f600"), (rb'{"\u00e9": "x"}', "\u00e9")],
)
def test_escaped_text_is_read_as_its_characters(raw: bytes, text: str) -> None:
    body = _request(raw).json_body()
    assert text in (*body, *body.values())
