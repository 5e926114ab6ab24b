"""http/caching.py: entity tags of bytes and If-None-Match as RFC 9110 §13.1.2 evaluates it."""

from __future__ import annotations

import re

import pytest

from jobstream.http.caching import (
    if_none_match_matches,
    private_max_age,
    strong_etag,
    weak_etag,
)

CURRENT = strong_etag(b'{"job_types":[]}')


def test_a_strong_etag_is_a_quoted_hash_of_exactly_the_bytes() -> None:
    assert re.fullmatch(r'"[0-9a-f]{32}"', CURRENT)
    assert strong_etag(b'{"job_types":[]}') == CURRENT
    assert strong_etag(b'{"job_types":[] }') != CURRENT
    assert strong_etag(b"") != strong_etag(b"\x00")


def test_a_weak_etag_is_the_strong_one_marked_weak() -> None:
    assert weak_etag(b"abc") == "W/" + strong_etag(b"abc")


def test_private_max_age_is_one_clients_only() -> None:
    assert private_max_age(60) == "private, max-age=60"


@pytest.mark.parametrize(
    "field",
    [
        CURRENT,
        f"W/{CURRENT}",
        f'"other", {CURRENT}',
        f'W/"other",W/{CURRENT}',
        f'  {CURRENT}  , "other"',
        "*",
        " * ",
    ],
)
def test_the_current_tag_by_weak_comparison_or_a_star_matches(field: str) -> None:
    assert if_none_match_matches(field, CURRENT)
    # Weak comparison: a weak current tag matches the same ways.
    assert if_none_match_matches(field, f"W/{CURRENT}")


@pytest.mark.parametrize(
    "field",
    [
        None,
        "",
        '"other"',
        'W/"other", "another"',
        CURRENT[1:-1],  # unquoted
        f"w/{CURRENT}",  # the weak prefix is case-sensitive
        f"{CURRENT} garbage",  # not a list of entity-tags: ignored whole
        f'"a" "b" {CURRENT}',
        f"*, {CURRENT}",  # '*' only stands alone
        f'"{CURRENT}"',
    ],
)
def test_anything_else_matches_nothing(field: str | None) -> None:
    assert not if_none_match_matches(field, CURRENT)


def test_a_comma_inside_an_opaque_tag_is_part_of_it() -> None:
    assert if_none_match_matches('"x", "a,b"', '"a,b"')
    assert not if_none_match_matches('"a,b"', '"a"')


def test_a_malformed_current_tag_matches_only_a_star() -> None:
    assert not if_none_match_matches('"abc"', "abc")
    assert if_none_match_matches("*", "abc")
