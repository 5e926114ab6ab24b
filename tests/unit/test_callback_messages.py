"""A callback queue message's body (queue.py): the intent it names and its `without_result`."""

from __future__ import annotations

import json

import pytest

from jobstream.domain import IntentRef
from jobstream.queue import CallbackMessage, message_body, parse_callback_message

REF = IntentRef("job_b3RoZXItam9iLWlkLWZvci10ZXN0aW5nLW9ubHk", 3)


def test_a_body_round_trips_with_and_without_the_flag() -> None:
    assert parse_callback_message(message_body(REF)) == CallbackMessage(REF, False)
    assert parse_callback_message(message_body(REF, without_result=True)) == CallbackMessage(
        REF, True
    )
    # Unflagged, the body is what earlier releases sent and read.
    assert json.loads(message_body(REF)) == {"job_id": REF.job_id, "sequence": 3}


@pytest.mark.parametrize("flag", ["true", 1, None, False, [], {}])
def test_only_a_literal_true_skips_the_result(flag: object) -> None:
    body = json.dumps({"job_id": REF.job_id, "sequence": 3, "without_result": flag})
    assert parse_callback_message(body) == CallbackMessage(REF, False)


@pytest.mark.parametrize(
    "body",
    [
        "[]",
        '{"job_id": "", "sequence": 1}',
        '{"job_id": "j", "sequence": 0}',
        '{"job_id": "j", "sequence": true}',
        '{"sequence": 1, "without_result": true}',
    ],
)
def test_a_body_that_names_no_intent_is_refused(body: str) -> None:
    with pytest.raises(ValueError, match="callback intent"):
        parse_callback_message(body)
