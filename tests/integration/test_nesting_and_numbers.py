"""Bodies nested as deep as JSON allows, and numbers DynamoDB cannot hold, anywhere in a Task or
an ack body (issue 13, item 5): every answer is a 2xx or a 4xx protocol error, never a 5xx, and
a refused request writes nothing (the whole table is compared, as test_invariant_guards does).

The bodies are written as text: Python's own json.dumps could not write the deepest of them.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobstream.http.request import MAX_JSON_DEPTH
from jobstream.lifecycle.identity import derive_job_id
from jobstream.runtime import Runtime
from tests.support.harness import Api, canonical_task
from tests.support.state import whole_table
from tests.support.validation import validate, validate_error

FUZZ = settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
SENTINEL = "\u0000sentinel"
# Where a value can sit in a Task: every field the validation reads, and fields it ignores.
PLACES: list[tuple[str | int, ...]] = [
    ("unknown",),
    ("protocol_version",),
    ("job_type",),
    ("idempotency_key",),
    ("correlation_id",),
    ("callback_url",),
    ("deadline_ms",),
    ("labels",),
    ("labels", "name"),
    ("params",),
    ("params", "unknown"),
    ("params", "target_id"),
    ("params", "source"),
    ("params", "source", "platform"),
    ("params", "source", "account"),
    ("params", "source", "unknown"),
    ("params", "query"),
    ("params", "query", "tags"),
    ("params", "query", "tags", 0),
    ("params", "query", "expand"),
    ("params", "constraints"),
    ("params", "constraints", "limit"),
    ("params", "constraints", "scan_limit"),
    ("params", "constraints", "work_types"),
    ("params", "constraints", "work_types", 0),
    ("params", "constraints", "exclude"),
    ("params", "constraints", "exclude", 0),
    ("params", "constraints", "exclude", 0, "id"),
    ("params", "constraints", "unknown"),
]
_keys = itertools.count()


@st.composite
def nested_values(draw: st.DrawFn) -> str:
    """JSON text of a value nested `depth` times, in arrays or objects or both, to past the
    depth the JSON reader accepts."""
    depth = draw(st.integers(1, 1_200) | st.sampled_from([320, 330, 500, 990, 1_000]))
    leaf = draw(st.sampled_from(["1", '"x"', "null", "{}", "[]", "1e300"]))
    if draw(st.booleans()):
        return "[" * depth + leaf + "]" * depth
    key = draw(st.sampled_from(['"a"', '""', '"kind"']))
    return f"{{{key}:" * depth + leaf + "}" * depth


@st.composite
def number_texts(draw: st.DrawFn) -> str:
    """JSON numbers: exact and huge integers, many significant digits, huge and tiny exponents."""
    sign = draw(st.sampled_from(["", "-"]))
    digits = draw(st.sampled_from(["1", "9" * 38, "1" * 39, "12345678901234567890" * 3]))
    digits = draw(
        st.text(alphabet="0123456789", min_size=1, max_size=60).map(
            lambda text: text.lstrip("0") or "0"
        )
        | st.just(digits)
    )
    fraction = draw(st.sampled_from(["", ".0", ".5", ".000000000000000000000000000000000000001"]))
    exponent = draw(
        st.sampled_from(["", "e0", "e125", "e126", "e300", "e400", "e-130", "e-131", "e-400"])
        | st.integers(-450, 450).map(lambda value: f"e{value}")
    )
    return draw(
        st.sampled_from(
            [
                f"{sign}{digits}{fraction}{exponent}",
                f"{sign}{digits}",
                "1" + "0" * draw(st.integers(0, 400)),
                str(2**53 - 1),
                str(2**53),
                "1e300",
            ]
        )
    )


def _body_with(place: tuple[str | int, ...], value_text: str) -> bytes:
    """The canonical Task with the JSON text `value_text` at `place` (built as text)."""
    task: Any = canonical_task(idempotency_key=f"deep-{next(_keys)}")
    task["params"]["constraints"]["work_types"] = ["illustration"]
    holder = task
    for step in place[:-1]:
        holder = holder[step]
    last = place[-1]
    if isinstance(holder, list):
        holder[int(last)] = SENTINEL
    else:
        holder[last] = SENTINEL
    text = json.dumps(task)
    return text.replace(json.dumps(SENTINEL), value_text, 1).encode()


# The table as the last answer left it, per table (the examples of a test share one).
_tables: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}


def _answered_without_a_5xx_and_refusals_write_nothing(
    rt: Runtime, api: Api, method: str, target: str, body: bytes
) -> Any:
    name = rt.store.table_name
    before = _tables[name] if name in _tables else whole_table(rt)
    response = api.call(method, target, raw=body, headers={"content-type": "application/json"})
    assert response.status < 500, (response.status, response.body)
    after = whole_table(rt)
    if response.status >= 400:
        validate_error(response.body)
        assert after == before
    _tables[name] = after
    return response


@FUZZ
@given(place=st.sampled_from(PLACES), value=nested_values())
def test_a_task_nested_anywhere_to_any_depth_is_never_a_5xx(
    rt: Runtime, api: Api, place: tuple[str | int, ...], value: str
) -> None:
    response = _answered_without_a_5xx_and_refusals_write_nothing(
        rt, api, "POST", "/jobs", _body_with(place, value)
    )
    if response.status < 300:
        validate(response.body["job"], "Job")


@FUZZ
@given(place=st.sampled_from(PLACES), number=number_texts())
def test_a_task_holding_any_number_anywhere_is_never_a_5xx(
    rt: Runtime, api: Api, place: tuple[str | int, ...], number: str
) -> None:
    """A number DynamoDB cannot store (over 38 significant digits, out of its range) where it
    would be stored is a 400; an admitted job reads back."""
    response = _answered_without_a_5xx_and_refusals_write_nothing(
        rt, api, "POST", "/jobs", _body_with(place, number)
    )
    if response.status < 300:
        job_id = response.body["job"]["job_id"]
        read = api.get(f"/jobs/{job_id}")
        assert read.status == 200
        validate(read.body, "Job")


@FUZZ
@given(value=nested_values() | number_texts(), named=st.booleans())
def test_an_ack_body_nested_or_numbered_is_never_a_5xx(
    rt: Runtime, api: Api, value: str, named: bool
) -> None:
    job_id = derive_job_id("acme", canonical_task()["idempotency_key"])
    if rt.store.get_job(job_id) is None:
        api.post("/jobs", canonical_task())
        _tables.pop(rt.store.table_name, None)
    body = f'{{"ack_through": {value}}}' if named else f'{{"ack_through": "evt-1-1", "x": {value}}}'
    _answered_without_a_5xx_and_refusals_write_nothing(
        rt, api, "POST", f"/jobs/{job_id}/events/ack", body.encode()
    )


@pytest.mark.parametrize("place", PLACES, ids=lambda place: ".".join(map(str, place)))
def test_every_place_nested_deep_or_holding_a_huge_number_is_never_a_5xx(
    rt: Runtime, api: Api, place: tuple[str | int, ...]
) -> None:
    """Each place at the depth that was a 500 (protocol_version and job_type quote the value
    they refuse, as JSON.stringify, now written without recursion), near the reader's limit,
    and with a number DynamoDB cannot store."""
    for value in ("[" * 330 + "1" + "]" * 330, '{"a":' * 900 + "1" + "}" * 900, "1e300"):
        _answered_without_a_5xx_and_refusals_write_nothing(
            rt, api, "POST", "/jobs", _body_with(place, value)
        )


def test_a_refused_value_is_quoted_however_deep(rt: Runtime, api: Api) -> None:
    for place in (("protocol_version",), ("job_type",)):
        # As deep as a body may nest (the Task is one level): quoted in the refusal.
        levels = MAX_JSON_DEPTH - 1
        value = "[" * levels + "1" + "]" * levels
        response = _answered_without_a_5xx_and_refusals_write_nothing(
            rt, api, "POST", "/jobs", _body_with(place, value)
        )
        assert response.status == 400
        assert value in response.body["error"]["message"]
        # Deeper: refused for its depth; as deep as echoing it would overflow the stack (the
        # depth varies with the stack the handler runs on): a 400 all the same, never a crash.
        for levels, messages in (
            (MAX_JSON_DEPTH, {"nest at most"}),
            (946, {"nest at most", "valid JSON"}),
        ):
            value = "[" * levels + "1" + "]" * levels
            response = _answered_without_a_5xx_and_refusals_write_nothing(
                rt, api, "POST", "/jobs", _body_with(place, value)
            )
            assert response.status == 400
            message = response.body["error"]["message"]
            assert any(part in message for part in messages), message


def test_a_limit_of_1e300_is_a_400_that_writes_nothing(rt: Runtime, api: Api) -> None:
    for number in ("1e300", "1" + "0" * 40, str(2**53)):
        body = _body_with(("params", "constraints", "limit"), number)
        response = _answered_without_a_5xx_and_refusals_write_nothing(
            rt, api, "POST", "/jobs", body
        )
        assert response.status == 400
        assert response.body["error"]["detail"] == {
            "field": "params.constraints.limit",
            "max": 2**53 - 1,
        }
    response = api.call(
        "POST",
        "/jobs",
        raw=_body_with(("params", "constraints", "limit"), str(2**53 - 1)),
        headers={"content-type": "application/json"},
    )
    assert response.status == 202
