"""Task and candidate_search params validation against the protocol reference (§2.2, §7.1).

Every expectation here is taken from the reference document, not from the implementation:
the order of the checks, each message verbatim, HTTP 400, the code, `retryable: false`, the
JavaScript value rules (Number.isInteger, String.prototype.trim, UTF-16 `length`), and the
normalization that feeds the idempotency comparison.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstream.http.statuses import http_status
from jobstream.jobtypes import registry
from jobstream.protocol.errors import ErrorCode, ProtocolError
from jobstream.protocol.task import AdmissionRequest
from tests.support.validation import validate_error

ASTRAL = "\U0001f600"  # one character, two UTF-16 code units

INVALID_PARAMS = "invalid_params"


def task(**overrides: Any) -> dict[str, Any]:
    """A minimal valid Task; `overrides` replace or add top-level keys (MISSING deletes)."""
    body: dict[str, Any] = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "key-1",
        "params": {},
    }
    for name, value in overrides.items():
        if value is MISSING:
            body.pop(name, None)
        else:
            body[name] = value
    return body


def with_params(**params: Any) -> dict[str, Any]:
    return task(params=params)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def parse_task(body: Any) -> AdmissionRequest:
    """The Task as admission validates it: the envelope, then its registered job type's params."""
    request, _ = registry.parse_task(body)
    return request


def rejected(body: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_task(body)
    error = caught.value
    assert http_status(error) == 400
    document = error.body()
    validate_error(document)
    assert document["error"]["retryable"] is False
    assert document["error"]["message"] == error.message
    return error


def assert_invalid(body: Any, message: str, detail: dict[str, Any] | None = None) -> None:
    error = rejected(body)
    assert error.code is ErrorCode.INVALID_PARAMS
    assert error.code == INVALID_PARAMS
    assert error.message == message
    assert error.detail == detail
    if detail is None:
        assert "detail" not in error.body()["error"]
    else:
        assert error.body()["error"]["detail"] == detail


def accepted(body: Any) -> AdmissionRequest:
    request = parse_task(body)
    assert isinstance(request, AdmissionRequest)
    return request


# --------------------------------------------------------------------------------------------
# §2.2 step 1: the body


@pytest.mark.parametrize("body", [None, [], [task()], "task", 1, 1.5, True, False])
def test_body_must_be_an_object(body: Any) -> None:
    assert_invalid(body, "body must be a JSON object")


def test_the_canonical_fixture_task_is_accepted() -> None:
    body = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": "c78dd065-60aa-4e7a-bba5-38275019217c",
        "correlation_id": "review-chain:135",
        "labels": {"origin": "moderation", "tenant": "bot1"},
        "callback_url": "https://telesubmit-multi-bot.fly.dev/api/bot1/v1/jobs/events",
        "deadline_ms": 5400000,
        "params": {
            "source": {"platform": "pixiv", "account": "default"},
            "query": {"tags": ["西瓜肚"], "expand": True},
            "constraints": {
                "exclude": [{"kind": "work", "id": "149713091"}],
                "limit": 1,
                "scan_limit": 5,
                "work_types": ["illustration", "novel"],
            },
        },
    }
    request = accepted(body)
    assert request.job_type == "candidate_search"
    assert request.idempotency_key == "c78dd065-60aa-4e7a-bba5-38275019217c"
    assert request.correlation_id == "review-chain:135"
    assert request.callback_url == "https://telesubmit-multi-bot.fly.dev/api/bot1/v1/jobs/events"
    assert request.deadline_ms == 5400000
    # Our design stores and echoes labels (design.md §1.4).
    assert request.labels == {"origin": "moderation", "tenant": "bot1"}
    assert request.parsed.params == body["params"]
    assert request.parsed.target_id is None
    assert request.parsed.account == "default"
    assert request.parsed.work_types == ["illustration", "novel"]


def test_unknown_fields_are_ignored_everywhere() -> None:
    body = task(
        surprise={"nested": True},
        params={
            "future": 1,
            "source": {"platform": "pixiv", "extra": 1},
            "query": {"tags": ["a"], "weight": 2},
            "constraints": {"exclude": [{"kind": "tag", "id": "x", "note": "n"}], "new": []},
        },
    )
    request = accepted(body)
    assert request.parsed.params == {
        "source": {"platform": "pixiv"},
        "query": {"tags": ["a"]},
        "constraints": {"exclude": [{"kind": "tag", "id": "x"}]},
    }


# --------------------------------------------------------------------------------------------
# §2.2 steps 2-3: protocol_version


@pytest.mark.parametrize("body", [task(protocol_version=MISSING), task(protocol_version=None)])
def test_protocol_version_is_required(body: dict[str, Any]) -> None:
    assert_invalid(body, "protocol_version is required")


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("2", '"2"'),
        (1, "1"),
        (1.0, "1"),
        ("1.0", '"1.0"'),
        (" 1", '" 1"'),
        ("", '""'),
        (True, "true"),
        (False, "false"),
        (["1"], '["1"]'),
        ({"v": "1"}, '{"v":"1"}'),
    ],
)
def test_any_other_protocol_version_is_unsupported(value: Any, quoted: str) -> None:
    error = rejected(task(protocol_version=value))
    assert error.code is ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert error.message == f"unsupported protocol_version {quoted}"
    assert error.detail == {"received": value, "supported": ["1"]}
    assert error.body()["error"]["code"] == "unsupported_protocol_version"
    assert error.body()["error"]["detail"] == {"received": value, "supported": ["1"]}


@pytest.mark.parametrize(
    ("raw_json", "quoted"),
    [
        # JSON.stringify output for numbers the JS reference would print.
        ("1e21", "1e+21"),
        ("1e-7", "1e-7"),
        ("[1.0, 2]", "[1,2]"),
    ],
)
def test_unsupported_version_message_quotes_the_value_like_json_stringify(
    raw_json: str, quoted: str
) -> None:
    body = task()
    body["protocol_version"] = json.loads(raw_json)
    error = rejected(body)
    assert error.code is ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert error.message == f"unsupported protocol_version {quoted}"


# --------------------------------------------------------------------------------------------
# §2.2 step 4: job_type


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        (MISSING, "null"),
        (None, "null"),
        ("video_upload", '"video_upload"'),
        ("Candidate_Search", '"Candidate_Search"'),
        (" candidate_search", '" candidate_search"'),
        (5, "5"),
        (["candidate_search"], '["candidate_search"]'),
        ("候选", '"候选"'),
    ],
)
def test_job_type_must_be_a_registered_type(value: Any, quoted: str) -> None:
    expected_value = None if value is MISSING else value
    assert_invalid(
        task(job_type=value),
        f"unsupported job_type {quoted}",
        {
            "reason": "unsupported_job_type",
            "job_type": expected_value,
            # Every registered type, in the registry's order.
            "supported": ["candidate_search", "asset_fetch"],
        },
    )


# --------------------------------------------------------------------------------------------
# §2.2 step 5: idempotency_key (JS trim, UTF-16 length after trimming)

KEY_REQUIRED = "idempotency_key must be a non-empty string"
KEY_TOO_LONG = "idempotency_key must be at most 200 characters"


@pytest.mark.parametrize(
    "value",
    [
        MISSING,
        None,
        "",
        " ",
        "\t\n\r\v\f",
        "\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000",
        "\ufeff",  # JS trim removes the BOM; Python's str.strip() would not
        " \ufeff ",
        42,
        True,
        ["k"],
        {"k": "v"},
    ],
)
def test_idempotency_key_must_be_a_non_blank_string(value: Any) -> None:
    assert_invalid(task(idempotency_key=value), KEY_REQUIRED)


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("\u0085", "\u0085"),  # NEL is not JS whitespace
        ("\u001c", "\u001c"),  # nor are the information separators
        ("\u001f", "\u001f"),
        ("\u200b", "\u200b"),  # nor the zero width space
        ("  key-1  ", "key-1"),
        ("\ufeffkey-1\ufeff", "key-1"),
        ("\u3000key 1\u00a0", "key 1"),
        ("\u0085key\u0085", "\u0085key\u0085"),
        ("\u001ckey\u001d", "\u001ckey\u001d"),
        ("Key-CASE", "Key-CASE"),
    ],
)
def test_idempotency_key_is_trimmed_with_javascript_whitespace(value: str, key: str) -> None:
    assert accepted(task(idempotency_key=value)).idempotency_key == key


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("a" * 200, True),
        ("a" * 201, False),
        (ASTRAL * 100, True),  # 200 UTF-16 code units
        (ASTRAL * 101, False),  # 202 code units although only 101 code points
        ("a" * 199 + ASTRAL, False),  # 201 code units
        ("é" * 200, True),  # BMP characters count one unit each
        ("   " + "a" * 200 + "\ufeff\n", True),  # measured after trimming
        ("\u0085" + "a" * 200, False),  # U+0085 is not trimmed, so it counts
    ],
)
def test_idempotency_key_length_is_utf16_units_after_trimming(value: str, ok: bool) -> None:
    if ok:
        assert accepted(task(idempotency_key=value)).idempotency_key == value.strip(" \n\ufeff")
    else:
        assert_invalid(task(idempotency_key=value), KEY_TOO_LONG)


# --------------------------------------------------------------------------------------------
# §2.2 step 6: correlation_id (not trimmed; "" accepted as "no correlation")

CORRELATION = "correlation_id must be a string of at most 200 chars"


@pytest.mark.parametrize("value", [42, True, ["a"], {"a": "b"}, "c" * 201, ASTRAL * 101])
def test_correlation_id_must_be_a_short_string(value: Any) -> None:
    assert_invalid(task(correlation_id=value), CORRELATION)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (MISSING, None),
        (None, None),
        ("", None),
        ("review-chain:135", "review-chain:135"),
        ("  padded  ", "  padded  "),
        ("c" * 200, "c" * 200),
        (ASTRAL * 100, ASTRAL * 100),
    ],
)
def test_correlation_id_accepted_values(value: Any, stored: str | None) -> None:
    assert accepted(task(correlation_id=value)).correlation_id == stored


# --------------------------------------------------------------------------------------------
# §2.2 step 7: callback_url (no URL validation)

CALLBACK = "callback_url must be a string of at most 2000 chars"


@pytest.mark.parametrize("value", [42, False, {"url": "x"}, ["https://x"], "u" * 2001])
def test_callback_url_must_be_a_short_string(value: Any) -> None:
    assert_invalid(task(callback_url=value), CALLBACK)


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (MISSING, None),
        (None, None),
        ("", None),
        ("u" * 2000, "u" * 2000),
        ("not a url at all", "not a url at all"),
        ("ftp://example.org/hook", "ftp://example.org/hook"),
    ],
)
def test_callback_url_accepted_values(value: Any, stored: str | None) -> None:
    assert accepted(task(callback_url=value)).callback_url == stored


def test_callback_url_length_counts_utf16_units() -> None:
    assert accepted(task(callback_url="u" * 1998 + ASTRAL)).callback_url is not None
    assert_invalid(task(callback_url="u" * 1999 + ASTRAL), CALLBACK)


# --------------------------------------------------------------------------------------------
# §2.2 step 8: deadline_ms (Number.isInteger, >= 1000)

DEADLINE = "deadline_ms must be an integer of at least 1000 ms"


@pytest.mark.parametrize(
    "raw_json", ["1000", "1000.0", "1e3", "1E3", "5400000", "1.5e6", "100000000000000000000"]
)
def test_deadline_ms_integers_in_the_javascript_sense_are_accepted(raw_json: str) -> None:
    body = task()
    body["deadline_ms"] = json.loads(raw_json)
    request = accepted(body)
    assert request.deadline_ms == json.loads(raw_json)
    assert isinstance(request.deadline_ms, int)
    assert not isinstance(request.deadline_ms, bool)


@pytest.mark.parametrize(
    "value", [999, 999.0, 0, -1000, 1000.5, 999.9999, "5000", True, False, [1000], {"ms": 1000}]
)
def test_deadline_ms_rejects_non_integers_and_small_values(value: Any) -> None:
    assert_invalid(task(deadline_ms=value), DEADLINE)


def test_deadline_ms_absent_or_null_means_none() -> None:
    assert accepted(task()).deadline_ms is None
    assert accepted(task(deadline_ms=None)).deadline_ms is None


# --------------------------------------------------------------------------------------------
# §2.2 step 9: labels (stored and echoed in our design)


@pytest.mark.parametrize("value", [[], ["a"], "a=b", 1, True])
def test_labels_must_be_an_object(value: Any) -> None:
    assert_invalid(task(labels=value), "labels must be an object of strings")


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"team": 1}, "labels.team must be a string"),
        ({"team": None}, "labels.team must be a string"),
        ({"team": True}, "labels.team must be a string"),
        ({"team": ["x"]}, "labels.team must be a string"),
        ({"ok": "yes", "bad": {}, "worse": 2}, "labels.bad must be a string"),
        ({"with space": 0}, "labels.with space must be a string"),
    ],
)
def test_every_label_value_must_be_a_string(labels: dict[str, Any], message: str) -> None:
    assert_invalid(task(labels=labels), message)


def test_labels_are_kept_for_echoing() -> None:
    assert accepted(task(labels={"origin": "moderation", "empty": ""})).labels == {
        "origin": "moderation",
        "empty": "",
    }
    assert accepted(task(labels={})).labels in ({}, None)
    assert accepted(task(labels=None)).labels is None
    assert accepted(task()).labels is None


# --------------------------------------------------------------------------------------------
# Absent == null for every optional field


@pytest.mark.parametrize(
    "path",
    [
        ("correlation_id",),
        ("callback_url",),
        ("deadline_ms",),
        ("labels",),
        ("params", "source"),
        ("params", "query"),
        ("params", "constraints"),
        ("params", "target_id"),
        ("params", "source", "platform"),
        ("params", "source", "account"),
        ("params", "query", "expand"),
        ("params", "constraints", "exclude"),
        ("params", "constraints", "limit"),
        ("params", "constraints", "scan_limit"),
        ("params", "constraints", "work_types"),
    ],
)
def test_null_is_the_same_as_absent(path: tuple[str, ...]) -> None:
    base = task(
        params={
            "source": {"platform": "pixiv", "account": "default"},
            "query": {"tags": ["a"], "expand": True},
            "constraints": {
                "exclude": [{"kind": "work", "id": "1"}],
                "limit": 2,
                "scan_limit": 9,
                "work_types": ["illustration"],
            },
            "target_id": "t",
        },
        correlation_id="c",
        callback_url="https://x",
        deadline_ms=2000,
        labels={"a": "b"},
    )
    absent = copy.deepcopy(base)
    null = copy.deepcopy(base)
    parent_absent: dict[str, Any] = absent
    parent_null: dict[str, Any] = null
    for name in path[:-1]:
        parent_absent = parent_absent[name]
        parent_null = parent_null[name]
    del parent_absent[path[-1]]
    parent_null[path[-1]] = None
    from_absent = accepted(absent)
    from_null = accepted(null)
    assert from_null == from_absent
    assert from_null.parsed.canonical == from_absent.parsed.canonical
    assert from_absent != accepted(base)


# --------------------------------------------------------------------------------------------
# §2.2 step 10 / §7.1: params


@pytest.mark.parametrize("value", [MISSING, None, [], [{}], "params", 0, True])
def test_params_must_be_an_object(value: Any) -> None:
    assert_invalid(task(params=value), "params must be a JSON object")


def test_empty_params_are_accepted() -> None:
    request = accepted(task(params={}))
    assert request.parsed.params == {}
    assert request.parsed.target_id is None
    assert request.parsed.canonical == "{}"


# params.source


@pytest.mark.parametrize("value", ["pixiv", [], ["pixiv"], 1, True])
def test_source_must_be_an_object(value: Any) -> None:
    assert_invalid(with_params(source=value), "params.source must be a JSON object")


@pytest.mark.parametrize("platform", ["twitter", "Pixiv", " pixiv", "", 1, True, ["pixiv"], {}])
def test_source_platform_must_be_pixiv(platform: Any) -> None:
    assert_invalid(
        with_params(source={"platform": platform}),
        "params.source.platform must be 'pixiv'",
        {"received": platform},
    )


@pytest.mark.parametrize(
    "account", ["", " ", "\ufeff", "\u3000", 42, True, ["a"], {}, "a" * 101, ASTRAL * 51]
)
def test_source_account_must_be_a_non_blank_short_string(account: Any) -> None:
    assert_invalid(
        with_params(source={"account": account}),
        "params.source.account must be a non-empty string",
    )


@pytest.mark.parametrize(
    ("source", "normalized"),
    [
        ({}, None),
        ({"platform": None, "account": None}, None),
        ({"platform": "pixiv"}, {"platform": "pixiv"}),
        ({"account": " main "}, {"account": " main "}),  # kept untrimmed
        ({"account": "a" * 100}, {"account": "a" * 100}),
        ({"account": ASTRAL * 50}, {"account": ASTRAL * 50}),
        ({"account": "\u0085"}, {"account": "\u0085"}),
        ({"account": "x", "platform": "pixiv"}, {"platform": "pixiv", "account": "x"}),
    ],
)
def test_source_normalization(source: dict[str, Any], normalized: dict[str, Any] | None) -> None:
    params = accepted(with_params(source=source)).parsed.params
    if normalized is None:
        assert "source" not in params
    else:
        assert params["source"] == normalized
        assert list(params["source"]) == list(normalized)


# params.query

TAGS = "params.query.tags must be a non-empty array of strings"


@pytest.mark.parametrize("value", ["tag", [], ["tag"], 1, True])
def test_query_must_be_an_object(value: Any) -> None:
    assert_invalid(with_params(query=value), "params.query must be a JSON object")


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"tags": None},
        {"tags": []},
        {"tags": "a"},
        {"tags": {"0": "a"}},
        {"tags": ["a", ""]},
        {"tags": [" "]},
        {"tags": ["\ufeff"]},
        {"tags": ["a", 1]},
        {"tags": [None]},
        {"tags": [["a"]]},
        {"tags": ["a" * 101]},
        {"tags": [ASTRAL * 51]},
        {"tags": [" " + "a" * 100]},  # the reference measures the untrimmed tag
        {"expand": True},
    ],
)
def test_query_tags_must_be_non_blank_short_strings(query: dict[str, Any]) -> None:
    assert_invalid(with_params(query=query), TAGS)


def test_query_tags_are_limited_to_twenty() -> None:
    assert accepted(with_params(query={"tags": [f"t{i}" for i in range(20)]}))
    assert_invalid(
        with_params(query={"tags": [f"t{i}" for i in range(21)]}),
        "params.query.tags must contain at most 20 tags",
    )


def test_query_tag_count_is_checked_before_the_items() -> None:
    assert_invalid(
        with_params(query={"tags": ["", 1, *[f"t{i}" for i in range(19)]]}),
        "params.query.tags must contain at most 20 tags",
    )


@pytest.mark.parametrize("expand", ["true", 1, 0, [], {}])
def test_query_expand_must_be_a_boolean(expand: Any) -> None:
    assert_invalid(
        with_params(query={"tags": ["a"], "expand": expand}),
        "params.query.expand must be a boolean",
    )


@pytest.mark.parametrize(
    ("query", "normalized"),
    [
        ({"tags": ["a"]}, {"tags": ["a"]}),
        ({"tags": [" a ", "\ufeffb\u3000"]}, {"tags": ["a", "b"]}),
        ({"tags": ["\u0085c\u0085"]}, {"tags": ["\u0085c\u0085"]}),
        ({"tags": ["a"], "expand": False}, {"tags": ["a"]}),
        ({"tags": ["a"], "expand": None}, {"tags": ["a"]}),
        ({"tags": ["a"], "expand": True}, {"tags": ["a"], "expand": True}),
        ({"expand": True, "tags": ["a"]}, {"tags": ["a"], "expand": True}),
        ({"tags": ["a" * 100]}, {"tags": ["a" * 100]}),
        ({"tags": [ASTRAL * 50]}, {"tags": [ASTRAL * 50]}),
    ],
)
def test_query_normalization(query: dict[str, Any], normalized: dict[str, Any]) -> None:
    params = accepted(with_params(query=query)).parsed.params
    assert params["query"] == normalized
    assert list(params["query"]) == list(normalized)


# params.constraints

EXCLUDE = "params.constraints.exclude must be an array of at most 100 items"
EXCLUDE_KIND = "params.constraints.exclude[].kind must be one of work, candidate, tag"
EXCLUDE_ID = "params.constraints.exclude[].id must be a non-empty string"
WORK_TYPES = "params.constraints.work_types must be an array of non-empty strings"


@pytest.mark.parametrize("value", ["x", [], [{}], 5, True])
def test_constraints_must_be_an_object(value: Any) -> None:
    assert_invalid(with_params(constraints=value), "params.constraints must be a JSON object")


def test_empty_constraints_are_kept_as_an_empty_object() -> None:
    params = accepted(with_params(constraints={})).parsed.params
    assert params == {"constraints": {}}
    assert accepted(with_params(constraints={"limit": None})).parsed.params == {"constraints": {}}


@pytest.mark.parametrize(
    "exclude", ["work", {"kind": "work", "id": "1"}, 1, [{"kind": "work", "id": "1"}] * 101]
)
def test_exclude_must_be_a_short_array(exclude: Any) -> None:
    assert_invalid(with_params(constraints={"exclude": exclude}), EXCLUDE)


@pytest.mark.parametrize(
    "item",
    [
        1,
        "work",
        None,
        [],
        {},
        {"id": "1"},
        {"kind": "user", "id": "1"},
        {"kind": "Work", "id": "1"},
        {"kind": " work", "id": "1"},
        {"kind": None, "id": "1"},
        {"kind": 1, "id": "1"},
    ],
)
def test_exclude_kind_must_be_known(item: Any) -> None:
    assert_invalid(
        with_params(constraints={"exclude": [{"kind": "work", "id": "ok"}, item]}), EXCLUDE_KIND
    )


@pytest.mark.parametrize(
    "item",
    [
        {"kind": "work"},
        {"kind": "work", "id": None},
        {"kind": "candidate", "id": ""},
        {"kind": "tag", "id": " \ufeff "},
        {"kind": "work", "id": 149713091},
        {"kind": "work", "id": ["1"]},
        {"kind": "work", "id": "1" * 101},
        {"kind": "work", "id": ASTRAL * 51},
    ],
)
def test_exclude_id_must_be_a_non_blank_short_string(item: dict[str, Any]) -> None:
    assert_invalid(with_params(constraints={"exclude": [item]}), EXCLUDE_ID)


def test_exclude_normalization() -> None:
    exclude = [
        {"kind": "work", "id": " 149713091 "},
        {"kind": "candidate", "id": "\ufeffc-1"},
        {"kind": "tag", "id": "\u0085t\u0085"},
        {"id": "x", "kind": "work"},
    ]
    params = accepted(with_params(constraints={"exclude": exclude})).parsed.params
    assert params["constraints"]["exclude"] == [
        {"kind": "work", "id": "149713091"},
        {"kind": "candidate", "id": "c-1"},
        {"kind": "tag", "id": "\u0085t\u0085"},
        {"kind": "work", "id": "x"},
    ]
    assert [list(item) for item in params["constraints"]["exclude"]] == [["kind", "id"]] * 4


def test_exclude_allows_exactly_one_hundred_items_and_empty() -> None:
    hundred = [{"kind": "work", "id": str(i)} for i in range(100)]
    assert (
        len(
            accepted(with_params(constraints={"exclude": hundred})).parsed.params["constraints"][
                "exclude"
            ]
        )
        == 100
    )
    assert accepted(with_params(constraints={"exclude": []})).parsed.params == {
        "constraints": {"exclude": []}
    }


@pytest.mark.parametrize("name", ["limit", "scan_limit"])
@pytest.mark.parametrize("value", [0, -1, 0.5, 1.5, "5", True, False, [1], {}])
def test_limits_must_be_integers_of_at_least_one(name: str, value: Any) -> None:
    assert_invalid(
        with_params(constraints={name: value}),
        f"params.constraints.{name} must be an integer of at least 1",
    )


@pytest.mark.parametrize(
    ("raw_json", "limit", "scan_limit"),
    [
        ('{"limit": 1, "scan_limit": 1}', 1, 1),
        ('{"limit": 5.0, "scan_limit": 5e1}', 5, 50),
        ('{"limit": 1000, "scan_limit": 100}', 1000, 100),
        ('{"limit": 3, "scan_limit": 101}', 3, 100),
        ('{"limit": 3, "scan_limit": 100000}', 3, 100),
    ],
)
def test_scan_limit_is_clamped_to_one_hundred(raw_json: str, limit: int, scan_limit: int) -> None:
    constraints = accepted(with_params(constraints=json.loads(raw_json))).parsed.params[
        "constraints"
    ]
    assert constraints == {"limit": limit, "scan_limit": scan_limit}
    assert type(constraints["limit"]) is int
    assert type(constraints["scan_limit"]) is int


@pytest.mark.parametrize(
    "work_types", ["illustration", {"0": "novel"}, [""], ["novel", ""], [1], [None], [["novel"]], 1]
)
def test_work_types_must_be_an_array_of_non_empty_strings(work_types: Any) -> None:
    assert_invalid(with_params(constraints={"work_types": work_types}), WORK_TYPES)


@pytest.mark.parametrize(
    "work_types", [[], ["illustration"], ["illustration", "novel"], ["anything"], [" "]]
)
def test_work_types_accepted_values_are_kept(work_types: list[str]) -> None:
    request = accepted(with_params(constraints={"work_types": work_types}))
    assert request.parsed.params == {"constraints": {"work_types": work_types}}
    assert request.parsed.work_types == work_types


def test_constraints_key_order_is_fixed() -> None:
    constraints = {
        "work_types": ["novel"],
        "scan_limit": 9,
        "limit": 2,
        "exclude": [{"id": "1", "kind": "work"}],
    }
    normalized = accepted(with_params(constraints=constraints)).parsed.params["constraints"]
    assert list(normalized) == ["exclude", "limit", "scan_limit", "work_types"]


# params.target_id

TARGET_REQUIRED = "params.target_id must be a non-empty string"
TARGET_TOO_LONG = "params.target_id must be at most 200 characters"


@pytest.mark.parametrize("value", [42, "", "   ", "\ufeff", "\n\u3000", True, ["t"], {"id": "t"}])
def test_target_id_must_be_a_non_blank_string(value: Any) -> None:
    assert_invalid(with_params(target_id=value), TARGET_REQUIRED)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("t" * 200, True),
        ("t" * 201, False),
        (ASTRAL * 100, True),
        (ASTRAL * 101, False),
        ("  " + "t" * 200 + "\ufeff", True),
    ],
)
def test_target_id_length_is_measured_after_trimming(value: str, ok: bool) -> None:
    if ok:
        assert accepted(with_params(target_id=value)).parsed.target_id == value.strip(" \ufeff")
    else:
        assert_invalid(with_params(target_id=value), TARGET_TOO_LONG)


@pytest.mark.parametrize(
    ("value", "target_id"),
    [
        ("bot2-novel-marunomi", "bot2-novel-marunomi"),
        ("  bot2 \u00a0", "bot2"),
        ("\u0085bot\u0085", "\u0085bot\u0085"),
    ],
)
def test_target_id_is_lifted_out_of_params_and_trimmed(value: str, target_id: str) -> None:
    request = accepted(with_params(target_id=value, query={"tags": ["a"]}))
    assert request.parsed.target_id == target_id
    assert request.parsed.params == {"query": {"tags": ["a"]}}
    assert "target_id" not in request.parsed.canonical


def test_target_only_fixture_shape() -> None:
    request = accepted(
        {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": "target-only-example",
            "correlation_id": "review-chain:135",
            "labels": {"origin": "moderation", "tenant": "bot1"},
            "params": {"target_id": "example-illust-botefuku"},
        }
    )
    assert request.parsed.target_id == "example-illust-botefuku"
    assert request.parsed.params == {}


# --------------------------------------------------------------------------------------------
# Normalized form and the idempotency comparison (§2.4, §7.1)


def test_normalized_params_key_order_is_source_query_constraints() -> None:
    params = {
        "target_id": "t",
        "constraints": {"limit": 1},
        "query": {"expand": True, "tags": ["a"]},
        "source": {"account": "default", "platform": "pixiv"},
    }
    normalized = accepted(task(params=params)).parsed.params
    assert list(normalized) == ["source", "query", "constraints"]
    assert list(normalized["source"]) == ["platform", "account"]
    assert list(normalized["query"]) == ["tags", "expand"]


def canonical(params: dict[str, Any]) -> str:
    return accepted(task(params=params)).parsed.canonical


def test_canonical_form_is_the_normalized_params_as_json() -> None:
    request = accepted(
        task(params={"query": {"tags": [" 西瓜肚 "], "expand": False}, "target_id": " t "})
    )
    assert json.loads(request.parsed.canonical) == {"query": {"tags": ["西瓜肚"]}}
    assert json.loads(request.parsed.canonical) == request.parsed.params


def test_canonical_form_keeps_tag_order() -> None:
    assert canonical({"query": {"tags": ["a", "b"]}}) != canonical({"query": {"tags": ["b", "a"]}})


def test_canonical_form_keeps_exclude_order() -> None:
    first = {"kind": "work", "id": "1"}
    second = {"kind": "work", "id": "2"}
    assert canonical({"constraints": {"exclude": [first, second]}}) != canonical(
        {"constraints": {"exclude": [second, first]}}
    )


@pytest.mark.parametrize(
    ("left", "right"),
    [
        # input key order does not matter
        (
            {
                "query": {"tags": ["a"], "expand": True},
                "constraints": {"limit": 1, "scan_limit": 5},
            },
            {
                "constraints": {"scan_limit": 5, "limit": 1},
                "query": {"expand": True, "tags": ["a"]},
            },
        ),
        # whitespace around tags and exclude ids is not significant
        (
            {"query": {"tags": [" a", "b\ufeff"]}},
            {"query": {"tags": ["a", "b"]}},
        ),
        (
            {"constraints": {"exclude": [{"kind": "work", "id": " 7 "}]}},
            {"constraints": {"exclude": [{"kind": "work", "id": "7"}]}},
        ),
        # expand:false is the same as no expand
        ({"query": {"tags": ["a"], "expand": False}}, {"query": {"tags": ["a"]}}),
        # scan_limit is compared after clamping
        ({"constraints": {"scan_limit": 500}}, {"constraints": {"scan_limit": 100}}),
        # the target selector is not part of the comparison
        ({"target_id": "one", "query": {"tags": ["a"]}}, {"query": {"tags": ["a"]}}),
        ({"target_id": "one"}, {"target_id": "two"}),
        # the platform / account shapes
        ({"source": {}}, {}),
        ({"source": {"platform": None}}, {}),
        ({"limit": 5, "unknown": 1}, {}),
    ],
)
def test_canonical_form_ignores_what_normalization_removes(
    left: dict[str, Any], right: dict[str, Any]
) -> None:
    assert canonical(left) == canonical(right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ({"constraints": {}}, {}),
        ({"query": {"tags": ["a"], "expand": True}}, {"query": {"tags": ["a"]}}),
        ({"query": {"tags": ["a"]}}, {"query": {"tags": ["A"]}}),
        ({"query": {"tags": ["a"]}}, {"query": {"tags": ["a", "a"]}}),
        ({"source": {"account": "main"}}, {"source": {"account": " main "}}),
        ({"source": {"platform": "pixiv"}}, {}),
        ({"constraints": {"limit": 1}}, {"constraints": {"limit": 2}}),
        ({"constraints": {"scan_limit": 99}}, {"constraints": {"scan_limit": 100}}),
        ({"constraints": {"work_types": []}}, {"constraints": {}}),
    ],
)
def test_canonical_form_distinguishes_different_params(
    left: dict[str, Any], right: dict[str, Any]
) -> None:
    assert canonical(left) != canonical(right)


def test_normalization_is_idempotent() -> None:
    raw = {
        "target_id": " t ",
        "source": {"account": " acct ", "platform": "pixiv"},
        "query": {"tags": [" a ", "b"], "expand": True},
        "constraints": {
            "scan_limit": 400,
            "exclude": [{"kind": "work", "id": " 1 "}],
            "work_types": ["novel"],
            "limit": 3,
        },
    }
    first = accepted(task(params=raw)).parsed
    second = accepted(task(params={**first.params, "target_id": first.target_id})).parsed
    assert second.params == first.params
    assert second.canonical == first.canonical
    assert second.target_id == first.target_id == "t"


# --------------------------------------------------------------------------------------------
# First failure wins: the checks run in the reference order

# Each fault breaks exactly one rule; applying faults i..n must report fault i.
Fault = tuple[str, Callable[[dict[str, Any]], None]]


def _set(*path_and_value: Any) -> Callable[[dict[str, Any]], None]:
    *path, value = path_and_value

    def apply(body: dict[str, Any]) -> None:
        node = body
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = value

    return apply


FAULTS: list[Fault] = [
    ("protocol_version is required", _set("protocol_version", None)),
    ('unsupported job_type "video"', _set("job_type", "video")),
    (KEY_REQUIRED, _set("idempotency_key", " ")),
    (CORRELATION, _set("correlation_id", 7)),
    (CALLBACK, _set("callback_url", 7)),
    (DEADLINE, _set("deadline_ms", 999)),
    ("labels.x must be a string", _set("labels", {"x": 1})),
    ("params.source.platform must be 'pixiv'", _set("params", "source", "platform", "x")),
    ("params.source.account must be a non-empty string", _set("params", "source", "account", "")),
    (TAGS, _set("params", "query", "tags", [])),
    ("params.query.expand must be a boolean", _set("params", "query", "expand", "yes")),
    (EXCLUDE_KIND, _set("params", "constraints", "exclude", [{"kind": "x", "id": ""}])),
    (
        "params.constraints.limit must be an integer of at least 1",
        _set("params", "constraints", "limit", 0),
    ),
    (
        "params.constraints.scan_limit must be an integer of at least 1",
        _set("params", "constraints", "scan_limit", 0),
    ),
    (WORK_TYPES, _set("params", "constraints", "work_types", [""])),
    (TARGET_REQUIRED, _set("params", "target_id", "")),
]


@pytest.mark.parametrize("first", range(len(FAULTS)), ids=[message for message, _ in FAULTS])
def test_the_first_failing_rule_wins(first: int) -> None:
    body = task(params={"query": {"tags": ["a"]}})
    # Apply the later faults first so an earlier fault's path overrides nothing it needs.
    for _, fault in reversed(FAULTS[first:]):
        fault(body)
    error = rejected(body)
    assert error.code is ErrorCode.INVALID_PARAMS
    assert error.message == FAULTS[first][0]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([{"protocol_version": "2"}], "body must be a JSON object"),
        (
            {"protocol_version": "2", "job_type": None, "idempotency_key": None},
            'unsupported protocol_version "2"',
        ),
        (
            task(idempotency_key="k" * 201, correlation_id="c" * 201),
            KEY_TOO_LONG,
        ),
        (
            task(labels=[], params=None),
            "labels must be an object of strings",
        ),
        (
            task(params={"source": "x", "query": "x", "constraints": "x", "target_id": 1}),
            "params.source must be a JSON object",
        ),
        (
            task(params={"query": "x", "constraints": "x", "target_id": 1}),
            "params.query must be a JSON object",
        ),
        (
            task(params={"constraints": "x", "target_id": 1}),
            "params.constraints must be a JSON object",
        ),
        (
            task(
                params={
                    "constraints": {
                        "exclude": "x",
                        "limit": 0,
                        "scan_limit": 0,
                        "work_types": "x",
                    }
                }
            ),
            EXCLUDE,
        ),
        (
            task(params={"constraints": {"exclude": [{"kind": "work"}, {"kind": "bad"}]}}),
            EXCLUDE_ID,
        ),
        (task(params={"target_id": "t" * 201, "query": {"tags": "x"}}), TAGS),
    ],
)
def test_earlier_failures_shadow_later_ones(body: Any, message: str) -> None:
    assert rejected(body).message == message


def test_parse_is_pure() -> None:
    body = task(
        idempotency_key="  k  ",
        params={
            "query": {"tags": [" a "]},
            "constraints": {"scan_limit": 500, "exclude": [{"kind": "work", "id": " 1 "}]},
            "target_id": " t ",
        },
    )
    snapshot = copy.deepcopy(body)
    first = accepted(body)
    assert body == snapshot
    assert accepted(body) == first
    # The normalized params must not alias the caller's objects.
    first.parsed.params["query"]["tags"].append("mutated")
    assert body == snapshot


# --------------------------------------------------------------------------------------------
# Properties: nothing but ProtocolError ever escapes, and errors are always well formed

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", " ", "\ufeff", "\u0085", "1", "pixiv", "work", "candidate_search"])
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def _field(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes any JSON value at all."""
    return st.integers(0, 9).flatmap(lambda pick: json_values if pick == 0 else strategy)


def _object(**optional: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=optional)


exclude_items = st.lists(
    _object(
        kind=_field(st.sampled_from(["work", "candidate", "tag"])),
        id=_field(st.text(max_size=102)),
    ),
    max_size=4,
)
params_objects = _object(
    source=_field(
        _object(platform=_field(st.just("pixiv")), account=_field(st.text(max_size=105)))
    ),
    query=_field(
        _object(
            tags=_field(st.lists(st.text(max_size=102), max_size=22)),
            expand=_field(st.booleans()),
        )
    ),
    constraints=_field(
        _object(
            exclude=_field(exclude_items),
            limit=_field(st.integers(min_value=-2, max_value=200)),
            scan_limit=_field(st.integers(min_value=-2, max_value=200)),
            work_types=_field(st.lists(st.text(max_size=3), max_size=3)),
        )
    ),
    target_id=_field(st.text(max_size=205)),
)
tasks_near_valid = st.fixed_dictionaries(
    {
        "protocol_version": st.sampled_from(["1"] * 30 + [1, None, "2"]),
        "job_type": st.sampled_from(["candidate_search"] * 30 + [None, "x"]),
        "idempotency_key": _field(
            st.text(min_size=1, max_size=30)
            | st.text(alphabet=f"ab {ASTRAL}", min_size=98, max_size=205)
        ),
        "params": _field(params_objects),
    },
    optional={
        "correlation_id": _field(st.text(max_size=30) | st.text(min_size=195, max_size=205)),
        "callback_url": _field(st.text(max_size=20)),
        "deadline_ms": _field(st.integers(min_value=990, max_value=2000)),
        "labels": _field(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)),
    },
)

# ECMAScript WhiteSpace and LineTerminator code points (what String.prototype.trim removes).
JS_TRIMMED = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

ALLOWED_CODES = {ErrorCode.INVALID_PARAMS, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION}


def _outcome(body: Any) -> AdmissionRequest | ProtocolError:
    # Anything other than ProtocolError propagates and fails the property.
    try:
        return parse_task(body)
    except ProtocolError as error:
        return error


def _check_outcome(body: Any) -> None:
    request = _outcome(body)
    if isinstance(request, ProtocolError):
        assert http_status(request) == 400
        assert isinstance(request.code, ErrorCode)
        assert request.code in ALLOWED_CODES
        document = request.body()
        validate_error(document)
        assert document["error"]["retryable"] is False
        assert isinstance(request.message, str)
        assert request.message
        return
    # Accepted: the result honours every rule that was checked.
    assert isinstance(body, dict)
    assert body["protocol_version"] == "1"
    assert body["job_type"] == "candidate_search"
    key = request.idempotency_key
    assert key
    assert key == key.strip(JS_TRIMMED)
    assert len(key.encode("utf-16-le")) // 2 <= 200
    assert json.loads(request.parsed.canonical) == request.parsed.params
    assert set(request.parsed.params) <= {"source", "query", "constraints"}
    constraints = request.parsed.params.get("constraints", {})
    assert constraints.get("scan_limit", 1) <= 100
    # JSON-serializable throughout (it is stored and echoed).
    json.dumps(request.parsed.params)
    if request.labels is not None:
        assert all(isinstance(value, str) for value in request.labels.values())


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_arbitrary_json_only_ever_raises_protocol_errors(body: Any) -> None:
    _check_outcome(body)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=20), json_values, max_size=8))
def test_arbitrary_objects_only_ever_raise_protocol_errors(body: dict[str, Any]) -> None:
    _check_outcome(body)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(tasks_near_valid)
def test_near_valid_tasks_only_ever_raise_protocol_errors(body: dict[str, Any]) -> None:
    _check_outcome(body)
