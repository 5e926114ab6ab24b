"""Torn commits in any history (design I10: a crash between any two steps loses nothing).

A non-terminal commit is the job's conditional write, then its event's put (store/pending.py); a
terminal one is a transaction of both. Hypothesis draws a short history over one to three jobs
of one tenant: admissions, worker runs, cancels, pages, acks, dispatcher runs, sweeps and the
clock. Each operation that may commit runs whole, or torn: its invocation dies right before its
n-th event put (after its job's write), and its client or SQS may try it again. Then what runs
anyway runs once more: the dispatcher, and either the sweep once the hand-off grace has passed
or a consumer's page of every job (drawn: each path alone must complete every stream), the
dispatcher again; and every job's stream must be whole: each event its commits decided written
once, the events torn writers left as they would have written them, each in the tenant's feed
once, each callback handed to the callback queue.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Final

import boto3
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from jobstream import runtime as runtime_module
from jobstream.domain import TERMINAL_STATUSES
from jobstream.lifecycle.identity import derive_job_id
from jobstream.lifecycle.transitions import TERMINAL_KIND_BY_STATUS
from jobstream.protocol.events import ONCE_PER_JOB_KINDS, TERMINAL_KINDS, event_id, protocol_type
from jobstream.runtime import Runtime
from jobstream.service import execution
from jobstream.service.sweep import sweep
from jobstream.store import keys
from jobstream.store.codec import from_item
from jobstream.store.jobs import JobStore
from tests.support.client_hooks import hooked
from tests.support.dispatch import dispatch_stream
from tests.support.harness import Api, Clock, canonical_task
from tests.support.isolated import on_own_table_and_queues
from tests.support.state import whole_table

TENANT: Final = "acme"
# The operations of a history; all but the dispatcher's and the clock's may commit, so may tear.
COMMITTING: Final = ("submit", "work", "cancel", "page", "ack", "sweep")
ACTIONS: Final = (*COMMITTING, "dispatch", "advance")
# Small steps, and steps past the lease (3 min), the stall and the queued budget.
ADVANCES: Final = (1_000, 60_001, 180_001, 900_001, 1_800_001)
# How many times to read the queue before deciding it is empty (10 messages a read).
MAX_QUEUE_READS: Final = 100


class DeathError(BaseException):
    """The invocation dies here. Not an Exception: no handler of the service may catch a
    death and carry on as if its write had been refused."""


@dataclass(frozen=True)
class Step:
    action: str
    job: int = 0
    # 0: the operation runs whole; n: its invocation dies right before its n-th event put.
    tear: int = 0
    # Whether the torn operation is tried again (the client's retry, SQS's redelivery).
    retry: bool = False
    ms: int = 0


@dataclass(frozen=True)
class History:
    callbacks: tuple[bool, ...]  # one a job: whether it declares a callback URL
    steps: tuple[Step, ...]


@st.composite
def histories(draw: st.DrawFn) -> History:
    """A history whose every step but an admission is about a job admitted before (or tried:
    its admission may have torn), so that few steps are spent on jobs that do not exist."""
    callbacks = tuple(draw(st.lists(st.booleans(), min_size=1, max_size=3)))
    # Most of the operations that commit tear, mostly at their first event put.
    tears = st.sampled_from((0, 1, 1, 2))
    # A torn operation left alone leaves its event to the other paths, which the test is about.
    retries = st.sampled_from((False, False, True))
    submitted = [draw(st.integers(0, len(callbacks) - 1))]
    steps = [Step("submit", submitted[0], draw(tears), draw(retries))]
    for _ in range(draw(st.integers(0, 11))):
        action = draw(st.sampled_from(ACTIONS))
        if action == "submit":
            job = draw(st.integers(0, len(callbacks) - 1))
            submitted.append(job)
        else:
            job = draw(st.sampled_from(submitted))
        ms = draw(st.sampled_from(ADVANCES)) if action == "advance" else 0
        steps.append(Step(action, job, draw(tears), draw(retries), ms))
    return History(callbacks, tuple(steps))


@dataclass(frozen=True)
class Intended:
    """The event a torn writer was putting when it died: what a whole run writes."""

    kind: str
    at: int
    callback: bool


@dataclass
class Run:
    """One history on a table and queues of its own, the services as Lambda runs them."""

    rt: Runtime
    store: JobStore  # rt's, as the store itself: its client is where an invocation dies
    clock: Clock
    callbacks: tuple[bool, ...]
    api: Api = field(default_factory=lambda: Api(token=f"{TENANT}-token"))
    intended: dict[tuple[str, int], Intended] = field(default_factory=dict)
    torn_twice_otherwise: list[tuple[str, int]] = field(default_factory=list)
    messages: int = 0

    def job_id(self, job: int) -> str:
        return derive_job_id(TENANT, f"key-{job}")

    @contextlib.contextmanager
    def dying_before_event_put(self, action: str, nth: int) -> Iterator[None]:
        """The invocation dies right before its `nth` event put (after that commit's job
        write; or before a late write of an event another writer left). The event it was
        putting is recorded as intended."""
        puts = 0

        def before(params: dict[str, Any], **_: Any) -> None:
            nonlocal puts
            item = from_item(params.get("Item", {}))
            if not str(item.get(keys.SK, "")).startswith(keys.EVENT_PREFIX):
                return
            puts += 1
            if puts != nth:
                return
            position = (keys.job_id_of(item[keys.PK]), keys.sequence_of(item[keys.SK]))
            intended = Intended(item["kind"], item["at"], "state" in item)
            # The same event torn twice (its late write dies too) is the same event; checked
            # after the run (an assertion here would be an exception the service may catch).
            if self.intended.setdefault(position, intended) != intended:
                self.torn_twice_otherwise.append(position)
            event(f"torn: {action} before {intended.kind}")
            raise DeathError(item[keys.SK])

        with hooked(self.store.client, "provide-client-params.dynamodb.PutItem", before, "dies"):
            yield

    def apply(self, step: Step) -> None:
        if step.action == "advance":
            self.clock.advance(step.ms)
            return
        if step.action == "dispatch":
            dispatch_stream(self.rt)
            return
        if step.tear == 0:
            self.operate(step)
            return
        with contextlib.suppress(DeathError), self.dying_before_event_put(step.action, step.tear):
            self.operate(step)
        if step.retry:
            if step.action == "work":
                # SQS hands the message back once its visibility timeout, longer than the
                # dead invocation's lease, has passed.
                self.clock.advance(self.rt.settings.lease_ms + 1)
            self.operate(step)

    def operate(self, step: Step) -> None:
        job_id = self.job_id(step.job)
        if step.action == "submit":
            self.api.post("/jobs", self.task(step.job))
        elif step.action == "work":
            self.messages += 1
            body = json.dumps({"job_id": job_id})
            # A run that fails keeps its message: SQS delivers it again (a later "work" step).
            with contextlib.suppress(Exception):
                execution.handle_work_message(self.rt, body, f"message-{self.messages}")
        elif step.action == "cancel":
            self.api.post(f"/jobs/{job_id}/cancel")
        elif step.action == "page":
            self.api.get(f"/jobs/{job_id}/events")
        elif step.action == "ack":
            events, _ = self.rt.store.events_after(job_id, 0, 200)
            last = events[-1] if events else None
            through = event_id(job_id, last.at, last.sequence) if last else "evt-0-1"
            self.api.post(f"/jobs/{job_id}/events/ack", {"ack_through": through})
        elif step.action == "sweep":
            sweep(self.rt)
        else:
            raise AssertionError(f"no operation {step.action}")

    def task(self, job: int) -> dict[str, Any]:
        # The reference catalog's tag: the worker finds a candidate without any network.
        task = canonical_task(
            idempotency_key=f"key-{job}", params={"query": {"tags": ["botefuku"]}}
        )
        if not self.callbacks[job]:
            task["callback_url"] = None
        return task

    def settle(self, *, by_sweep: bool) -> None:
        """What runs anyway after any history: the dispatcher (Lambda, on the table's stream);
        then the sweep a hand-off grace later, or a consumer's page of each job; the
        dispatcher on what those wrote."""
        dispatch_stream(self.rt)
        if by_sweep:
            self.clock.advance(keys.HANDOFF_GRACE_MS)
            sweep(self.rt)
        else:
            for job in range(len(self.callbacks)):
                self.api.get(f"/jobs/{self.job_id(job)}/events")
        dispatch_stream(self.rt)


def fresh_run(base: Runtime, callbacks: tuple[bool, ...], monkeypatch: pytest.MonkeyPatch) -> Run:
    """`base` (tenant acme's callback settings) on a table, queues and clock of the example's
    own: Hypothesis runs every example in the one test's fixtures."""
    clock = Clock()

    def sleep(seconds: float) -> None:
        # A run's waits (a retry's backoff, a resource's turn) move the example's clock.
        clock.advance(round(seconds * 1000))

    rt = replace(on_own_table_and_queues(base, "torn"), clock=clock, sleep=sleep)
    store = rt.store
    assert isinstance(store, JobStore)
    # The real handlers build their runtime from the environment; hand them this one.
    monkeypatch.setattr(runtime_module, "runtime", lambda: rt)
    return Run(rt, store, clock, callbacks)


def handed_off(rt: Runtime) -> set[tuple[str, int]]:
    """Every callback the callback queue was given: (job id, sequence)."""
    sqs = boto3.client("sqs")
    url = rt.settings.callback_queue_url or ""
    sent: set[tuple[str, int]] = set()
    for _ in range(MAX_QUEUE_READS):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return sent
        for message in messages:
            body = json.loads(message["Body"])
            sent.add((body["job_id"], body["sequence"]))
    raise AssertionError("the callback queue never ran dry")


def feed_entries(rt: Runtime, now: int) -> list[tuple[str, int]]:
    """The tenant's feed, every entry committed by `now`: (job id, sequence)."""
    entries: list[tuple[str, int]] = []
    after: str | None = None
    for _ in range(MAX_QUEUE_READS):
        page = rt.store.feed().entries_after(TENANT, after, horizon=now, limit=100)
        entries += [(entry.event.job_id, entry.event.sequence) for entry in page.entries]
        if not page.more or not page.entries:
            return entries
        after = page.entries[-1].position
    raise AssertionError("the feed never ended")


def check(run: Run) -> None:
    table = {key: from_item(item) for key, item in whole_table(run.rt).items()}
    feed = feed_entries(run.rt, run.clock.now)
    sent = handed_off(run.rt)
    in_feed: list[tuple[str, int]] = []
    submitted: set[str] = set()
    for job in range(len(run.callbacks)):
        job_id = run.job_id(job)
        job_item = table.get((keys.job_pk(job_id), keys.JOB_SK))
        if job_item is None:
            continue
        submitted.add(job_id)
        events = {
            keys.sequence_of(sk): item
            for (pk, sk), item in table.items()
            if pk == keys.job_pk(job_id) and sk.startswith(keys.EVENT_PREFIX)
        }
        count = int(job_item["event_count"])
        # Every event the job's commits decided is written, and none beyond them.
        assert sorted(events) == list(range(1, count + 1)), (job_id, count, sorted(events))
        stream = [events[sequence] for sequence in range(1, count + 1)]
        kinds = [event["kind"] for event in stream]
        assert kinds[0] == "job.requested", kinds
        for kind in ONCE_PER_JOB_KINDS:
            assert kinds.count(kind) <= 1, kinds
        terminal = [kind for kind in kinds if kind in TERMINAL_KINDS]
        if job_item["status"] in TERMINAL_STATUSES:
            assert terminal == [TERMINAL_KIND_BY_STATUS[job_item["status"]]], kinds
            assert kinds[-1] == terminal[0], kinds
        else:
            assert terminal == [], kinds
        ats = [int(event["at"]) for event in stream]
        assert ats == sorted(ats), ats
        assert ats[-1] == int(job_item["last_event_at"])
        for sequence, stored in zip(range(1, count + 1), stream, strict=True):
            shown = protocol_type(stored["kind"]) is not None
            # A job with a callback URL calls back every protocol event (written late too).
            assert ("state" in stored) == (shown and bool(job_item.get("callback_url"))), stored
            assert ("feed_sk" in stored) == shown, stored
            if shown:
                assert stored["feed_pk"] == keys.feed_pk(TENANT, job_id)
                in_feed.append((job_id, sequence))
            if "state" in stored:
                assert (job_id, sequence) in sent, f"callback {job_id} {sequence} never sent"
    assert run.torn_twice_otherwise == []
    # Each event a torn writer left is the one it was putting: its kind, its `at`, its callback.
    for (job_id, sequence), intended in run.intended.items():
        assert job_id in submitted
        written = table.get((keys.job_pk(job_id), keys.event_sk(sequence)))
        assert written is not None, f"torn event {job_id} {sequence} never written"
        assert (written["kind"], int(written["at"]), "state" in written) == (
            intended.kind,
            intended.at,
            intended.callback,
        )
    # The tenant's feed holds each protocol event once, and nothing else.
    assert sorted(feed) == sorted(in_feed)
    assert len(set(feed)) == len(feed)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories(), by_sweep=st.booleans())
# Each path alone: a torn admission, and a torn claim (which no commit follows while its lease
# lasts), left to the sweep and to the page; a torn claim that the completion follows.
@example(history=History((True,), (Step("submit", tear=1),)), by_sweep=True)
@example(history=History((True,), (Step("submit", tear=1),)), by_sweep=False)
@example(history=History((True,), (Step("submit"), Step("work", tear=1))), by_sweep=True)
@example(history=History((True,), (Step("submit"), Step("work", tear=1))), by_sweep=False)
@example(
    history=History((False,), (Step("submit"), Step("work", tear=1, retry=True))), by_sweep=False
)
def test_torn_commits_lose_nothing_in_any_history(
    crt: Runtime, monkeypatch: pytest.MonkeyPatch, history: History, *, by_sweep: bool
) -> None:
    run = fresh_run(crt, history.callbacks, monkeypatch)
    for step in history.steps:
        run.apply(step)
    run.settle(by_sweep=by_sweep)
    check(run)
