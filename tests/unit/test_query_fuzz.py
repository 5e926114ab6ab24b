"""Hypothesis-generated query strings and ack bodies against the pure facade.

Whatever a client puts after `?` (or in an ack body), the facade either returns well-formed
values or raises a ProtocolError whose body is a valid error envelope, with a 4xx status.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobstream.http.request import parse_event
from jobstream.http.statuses import http_status
from jobstream.protocol.errors import ProtocolError
from jobstream.protocol.js import JS_WHITESPACE, is_blank
from jobstream.protocol.queries import (
    JOB_STATUSES,
    MAX_FEED_LIMIT,
    MAX_FEED_WAIT_MS,
    MAX_LIST_LIMIT,
    parse_ack_body,
    parse_events_query,
    parse_feed_query,
    parse_list_query,
)
from jobstream.protocol.task import MAX_IDEMPOTENCY_KEY, parse_idempotency_key
from tests.support.validation import validate_error

NAMES = [
    "after",
    "unacked",
    "limit",
    "status",
    "cursor",
    "idempotency_key",
    "correlation_id",
    "consumer",
    "wait_ms",
]

values = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["", "0", "00", "1", "true", "false", "500", "501", "-1", "1e2", "running", " ", "20000"]
    ),
    st.integers(-(10**6), 10**6).map(str),
    st.sampled_from(["%", "%zz", "%00", "%E2%82%AC", "%ff", "+", "&", "="]),
    # More digits than int() reads (4,300).
    st.integers(4_000, 6_000).map(lambda length: "9" * length),
)
pairs = st.tuples(st.one_of(st.sampled_from(NAMES), st.text(max_size=6)), values)


@st.composite
def raw_query_strings(draw: st.DrawFn) -> str:
    """As API Gateway hands them over: encoded pairs, raw junk, or both."""
    encoded = "&".join(
        f"{quote(name, safe='')}={quote(value, safe='%')}"
        for name, value in draw(st.lists(pairs, max_size=6))
    )
    junk = draw(st.text(max_size=20))
    return draw(st.sampled_from([encoded, junk, f"{encoded}&{junk}", f"{junk}{encoded}"]))


def _query(raw: str) -> Any:
    event = {"rawQueryString": raw, "requestContext": {"http": {"method": "GET"}}}
    return parse_event(event).query


def _is_protocol_4xx(error: ProtocolError) -> None:
    assert 400 <= http_status(error) < 500
    validate_error(error.body())


@given(raw_query_strings())
def test_any_events_query_parses_or_is_a_protocol_error(raw: str) -> None:
    query = _query(raw)
    try:
        after, unacked = parse_events_query(query)
    except ProtocolError as error:
        _is_protocol_4xx(error)
        return
    assert isinstance(unacked, bool)
    assert after is None or (isinstance(after, str) and after)
    given_unacked = query.get("unacked")
    assert unacked == (given_unacked is not None and given_unacked[0] in {"1", "true"})


@given(raw_query_strings())
def test_any_list_query_parses_or_is_a_protocol_error(raw: str) -> None:
    query = _query(raw)
    try:
        parsed = parse_list_query(query)
    except ProtocolError as error:
        _is_protocol_4xx(error)
        return
    assert 1 <= parsed.limit <= MAX_LIST_LIMIT
    assert parsed.status is None or parsed.status in JOB_STATUSES
    for name in ("cursor", "correlation_id"):
        value = getattr(parsed, name)
        assert value is None or (value and query[name] == [value])


@given(raw_query_strings())
def test_any_feed_query_parses_or_is_a_protocol_error(raw: str) -> None:
    """GET /events (the tenant's feed): `wait_ms=0` was a 500 (no digit left once its zeros
    were stripped)."""
    query = _query(raw)
    try:
        parsed = parse_feed_query(query)
    except ProtocolError as error:
        _is_protocol_4xx(error)
        return
    assert 1 <= parsed.limit <= MAX_FEED_LIMIT
    assert 0 <= parsed.wait_ms <= MAX_FEED_WAIT_MS
    assert parsed.after is None or parsed.consumer is None


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("000", 0), ("007", 7), ("20000", 20_000)])
def test_a_wait_of_zeros_is_no_wait(text: str, value: int) -> None:
    assert parse_feed_query({"wait_ms": [text]}).wait_ms == value


@given(
    zeros=st.integers(0, 6_000),
    digits=st.sampled_from(["", "1", "7", "500", "501", "1" + "0" * 4_400, "9" * 4_400]),
)
def test_a_limit_of_any_length_is_read_by_its_value(zeros: int, digits: str) -> None:
    """Issue 22: a limit of more digits than int() reads was a 500. Any string of digits is
    now read by its value (Decimal reads any length): 1..MAX_LIST_LIMIT, else a 400."""
    text = "0" * zeros + digits
    if text and 1 <= Decimal(text) <= MAX_LIST_LIMIT:
        assert parse_list_query({"limit": [text]}).limit == Decimal(text)
        return
    with pytest.raises(ProtocolError) as refused:
        parse_list_query({"limit": [text]})
    _is_protocol_4xx(refused.value)
    assert refused.value.detail == {"field": "limit"}


_padding = st.text(alphabet=st.sampled_from([*JS_WHITESPACE[:4], "\u3000", "\ufeff"]), max_size=3)


@given(
    before=_padding,
    length=st.integers(0, MAX_IDEMPOTENCY_KEY + 2),
    after=_padding,
    inner=st.sampled_from(["k", "\u0085", "\U0001f600"]),
)
def test_the_key_filter_is_the_key_admission_keeps(
    before: str, length: int, after: str, inner: str
) -> None:
    """Issue 22: the lookup takes the key as admission does (trimmed as JavaScript trims,
    at most MAX_IDEMPOTENCY_KEY characters), and refuses what admission refuses with the same
    error; a blank key keeps the reference's words."""
    raw = before + inner * length + after
    try:
        kept: Any = parse_idempotency_key(raw)
    except ProtocolError as error:
        kept = error.body()
    try:
        parsed: Any = parse_list_query({"idempotency_key": [raw]}).idempotency_key
    except ProtocolError as error:
        _is_protocol_4xx(error)
        parsed = error.body()
    if is_blank(raw):
        assert parsed["error"]["message"] == "idempotency_key is required"
    else:
        assert parsed == kept


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3)
    ),
    max_leaves=8,
)


@given(
    st.one_of(
        json_values,
        st.dictionaries(st.just("ack_through"), json_values, min_size=1),
        st.fixed_dictionaries({"ack_through": st.text(max_size=40)}, optional={"x": json_values}),
    )
)
def test_any_ack_body_parses_or_is_a_protocol_error(body: Any) -> None:
    try:
        ack_through = parse_ack_body(body)
    except ProtocolError as error:
        _is_protocol_4xx(error)
        return
    assert isinstance(ack_through, str)
    assert ack_through
    assert body["ack_through"] == ack_through
