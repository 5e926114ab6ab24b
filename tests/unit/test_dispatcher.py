"""The dispatcher's choice of stream records (store/stream_images.py) is the template's filter
(DispatcherFunction's FilterCriteria, evaluated as Lambda does by jobstream_local/streams.py),
record for record: what wakes it is exactly what it hands off."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from jobstream import runtime as runtime_module
from jobstream.domain import IntentRef
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service.dispatcher import dispatch_records, handoffs
from jobstream.store.stream_images import NewCallback
from jobstream_local.event_filter import matches, passes
from jobstream_local.gateway import LambdaContext, load_handler
from jobstream_local.template import Template

JOB = "job_R-FEtjChNfSuVqRM7Jdl-iJNZxSTDOFg"


def record(name: str, sk: str, number: str = "100", **image: Any) -> dict[str, Any]:
    new_image = {"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": sk}}
    for attribute, value in image.items():
        new_image[attribute] = {"N": str(value)} if isinstance(value, int) else {"S": value}
    return {
        "eventName": name,
        "dynamodb": {
            "Keys": {"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": sk}},
            "NewImage": new_image,
            "SequenceNumber": number,
        },
    }


EVENT = "EVT#0000000002"
# (the record, what the dispatcher hands off for it: "job", "callback" or None)
CASES = {
    "admission": (record("INSERT", "#JOB", event_count=1, status="queued"), "job"),
    "an expired job replaced": (record("MODIFY", "#JOB", event_count=1), "job"),
    "the sweep's re-dispatch mark": (
        record("MODIFY", "#JOB", event_count=1, dispatched_at=5),
        None,
    ),
    "a slot wait's note": (
        record("MODIFY", "#JOB", event_count=1, status="queued", progress_stage="waiting"),
        None,
    ),
    "a claim": (record("MODIFY", "#JOB", event_count=2, status="running"), None),
    "a heartbeat": (record("MODIFY", "#JOB", event_count=3), None),
    "a new callback": (record("INSERT", EVENT, state="pending", attempts=0), "callback"),
    "an earlier job's slot taken": (
        record("MODIFY", EVENT, state="pending", attempts=0),
        "callback",
    ),
    "an event without callback": (record("INSERT", EVENT, kind="job.progressed"), None),
    "a claim of the callback": (record("MODIFY", EVENT, state="in_flight", attempts=1), None),
    "a retry": (record("MODIFY", EVENT, state="retry_wait", attempts=1), None),
    "the sweep's re-send": (
        record("MODIFY", EVENT, state="pending", attempts=0, resent_at=7),
        None,
    ),
    "a redrive": (record("MODIFY", EVENT, state="pending", attempts=0, resent_at=7), None),
    "a deletion": ({"eventName": "REMOVE", "dynamodb": {"Keys": {"sk": {"S": "#JOB"}}}}, None),
    "the ack cursor": (record("INSERT", "#ACK", ack_sequence=1), None),
    "a result": (record("INSERT", "#RESULT"), None),
}


def filters() -> tuple[dict[str, Any], ...]:
    (source,) = Template.load().stream_sources()
    return source.filters


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_template_filter_wakes_the_dispatcher_for_what_it_hands_off(case: str) -> None:
    change, expected = CASES[case]
    found = handoffs([change])
    handed = "job" if found.jobs else "callback" if found.callbacks else None
    assert handed == expected
    assert passes(filters(), change) == (expected is not None)


def test_what_is_handed_off_and_from_which_record() -> None:
    found = handoffs(
        [
            record("INSERT", "#JOB", number="9", event_count=1, tenant="acme"),
            record("INSERT", "EVT#0000000001", number="10", state="pending", attempts=0),
            record(
                "INSERT",
                "EVT#0000000002",
                number="11",
                state="pending",
                attempts=0,
                feed_pk="F3#acme",
                kind="job.execution_started",
            ),
        ]
    )
    # The job's tenant is its work message's group, and its callbacks' (SQS fair queues); an
    # event written before the feed names no tenant: its message goes without a group. The
    # event's kind comes along when the image has it.
    assert found.jobs == [("9", JobDispatch(JOB, "acme"))]
    assert found.callbacks == [
        ("10", NewCallback(IntentRef(JOB, 1), None)),
        ("11", NewCallback(IntentRef(JOB, 2), "acme", "job.execution_started")),
    ]


@pytest.mark.parametrize(
    ("pattern", "value", "present", "expected"),
    [
        (["a", "b"], "b", True, True),
        (["a"], "b", True, False),
        (["a"], None, False, False),
        ([{"prefix": "EVT#"}], "EVT#1", True, True),
        ([{"prefix": "EVT#"}], "#JOB", True, False),
        ([{"exists": False}], None, False, True),
        ([{"exists": False}], "x", True, False),
        ([{"exists": True}], "x", True, True),
        # `exists` tests a leaf: on an attribute's type object it sees nothing (AWS's rule).
        ([{"exists": False}], {"N": "5"}, True, True),
        ([{"exists": True}], {"N": "5"}, True, False),
        ({"N": [{"exists": False}]}, {"N": "5"}, True, False),
        ({"N": [{"exists": False}]}, None, False, True),
        ({"S": ["x"]}, {"S": "x"}, True, True),
        ({"S": ["x"]}, {"N": "1"}, True, False),
    ],
)
def test_filter_patterns_as_lambda_reads_them(
    pattern: Any, value: Any, present: bool, expected: bool
) -> None:
    assert matches(pattern, value, present) is expected


class FakeQueue:
    """A queue that accepts what it is sent, or refuses it (`error`), or accepts only the
    first `accepts` messages of each send (SQS's partial answer to a batch)."""

    def __init__(self, *, error: Exception | None = None, accepts: int | None = None) -> None:
        self.url = "https://sqs.example.test/queue"
        self.error = error
        self.accepts = accepts
        self.sent: list[list[Any]] = []
        self.tenants: list[list[str | None] | None] = []
        self.without_result: list[list[bool] | None] = []

    def send(
        self,
        items: list[Any],
        tenants: list[str | None] | None = None,
        without_result: list[bool] | None = None,
    ) -> int:
        self.sent.append(list(items))
        self.tenants.append(tenants)
        self.without_result.append(without_result)
        if self.error is not None:
            raise self.error
        return len(items) if self.accepts is None else min(self.accepts, len(items))


def runtime_with(work: FakeQueue, callback: FakeQueue) -> Runtime:
    return cast(Runtime, SimpleNamespace(work_queue=work, callback_queue=callback))


OTHER = "job_b3RoZXItam9iLWlkLWZvci10ZXN0aW5nLW9ubHk"


def admissions() -> list[dict[str, Any]]:
    """Two admissions' records as the stream carries them, with a record nothing hands off."""
    second = record("INSERT", "#JOB", number="13", event_count=1, tenant="globex")
    second["dynamodb"]["NewImage"]["pk"] = {"S": f"JOB#{OTHER}"}
    return [
        record("INSERT", "#JOB", number="10", event_count=1, tenant="acme"),
        record("INSERT", "EVT#0000000001", number="11", state="pending", attempts=0),
        record("INSERT", "#ACK", number="12", ack_sequence=1),
        second,
    ]


def test_a_batch_whose_sends_pass_has_no_failures() -> None:
    work, callback = FakeQueue(), FakeQueue()
    assert dispatch_records(runtime_with(work, callback), admissions()) == []
    assert work.sent == [[JobDispatch(JOB, "acme"), JobDispatch(OTHER, "globex")]]
    assert callback.sent == [[IntentRef(JOB, 1)]]
    assert callback.tenants == [[None]]
    assert callback.without_result == [[False]]  # its kind unknown: its attempt reads it


def test_a_callback_whose_event_shows_no_result_says_so_in_its_message() -> None:
    """Only a terminal event's body shows the job with its result (lifecycle/log.py): the
    other messages flag it, and their attempts read two items instead of three."""
    kinds = ["job.requested", "job.execution_started", "job.progressed", "job.outcome_succeeded"]
    records = [
        record("INSERT", f"EVT#000000000{n}", number=str(n), state="pending", attempts=0, kind=k)
        for n, k in enumerate(kinds, start=1)
    ]
    callback = FakeQueue()
    assert dispatch_records(runtime_with(FakeQueue(), callback), records) == []
    assert callback.without_result == [[True, True, True, False]]


def test_a_refused_send_names_its_earliest_record() -> None:
    """Lambda resumes a stream batch from the lowest failed sequence number: the callbacks,
    sent, are sent again after it (a duplicate is harmless), nothing before it is."""
    work, callback = FakeQueue(error=ConnectionError("sqs down")), FakeQueue()
    assert dispatch_records(runtime_with(work, callback), admissions()) == ["10"]
    assert callback.sent == [[IntentRef(JOB, 1)]]  # still sent: the retry repeats it


def test_a_batch_sqs_took_only_in_part_is_a_failure_from_its_first_record() -> None:
    work, callback = FakeQueue(), FakeQueue(accepts=0)
    assert dispatch_records(runtime_with(work, callback), admissions()) == ["11"]
    work, callback = FakeQueue(accepts=1), FakeQueue()
    assert dispatch_records(runtime_with(work, callback), admissions()) == ["10"]


def test_sequence_numbers_order_by_value_not_by_text() -> None:
    records = [
        record("INSERT", "EVT#0000000001", number="100", state="pending", attempts=0),
        record("INSERT", "#JOB", number="99", event_count=1),
    ]
    failing = FakeQueue(error=ConnectionError("sqs down"))
    assert dispatch_records(runtime_with(failing, failing), records) == ["99"]


def test_a_batch_that_names_nothing_sends_nothing() -> None:
    work, callback = FakeQueue(), FakeQueue()
    quiet = [record("MODIFY", "#JOB", event_count=2), record("INSERT", "#RESULT")]
    assert dispatch_records(runtime_with(work, callback), quiet) == []
    assert work.sent == callback.sent == []


def test_the_handler_answers_as_a_partial_batch_response(monkeypatch: pytest.MonkeyPatch) -> None:
    (source,) = Template.load().stream_sources()
    handler = load_handler(source.function)
    work, callback = FakeQueue(), FakeQueue(error=ConnectionError("sqs down"))
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime_with(work, callback))
    answer = handler({"Records": admissions()}, LambdaContext(source.function.name))
    assert answer == {"batchItemFailures": [{"itemIdentifier": "11"}]}
    monkeypatch.setattr(runtime_module, "runtime", lambda: runtime_with(FakeQueue(), FakeQueue()))
    answer = handler({"Records": admissions()}, LambdaContext(source.function.name))
    assert answer == {"batchItemFailures": []}
