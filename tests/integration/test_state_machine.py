"""A stateful model test over the services (design §3 I1-I9).

Hypothesis drives two tenants and a few idempotency keys through admission, replays, workers
(claim, heartbeat, progress, complete), cancels, pages, acks, callback deliveries, sweeps and a
controllable clock; after every step the whole table is read back and the invariants checked.
Every example runs on a fresh table.
"""

from __future__ import annotations

import copy
import functools
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import boto3
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from jobstream.config.targets import DEFAULT_MAX_ATTEMPTS
from jobstream.delivery.http import HttpResult
from jobstream.domain import OPEN_CALLBACK_STATES, CallbackState, IntentRef, JobRecord, StoredEvent
from jobstream.http.statuses import http_status
from jobstream.jobtypes import registry
from jobstream.jobtypes.runner import Outcome
from jobstream.lifecycle.identity import derive_job_id
from jobstream.lifecycle.retention import callback_span_ms, item_expiry, job_expiry
from jobstream.lifecycle.transitions import TERMINAL_KIND_BY_STATUS
from jobstream.protocol import documents
from jobstream.protocol.errors import ErrorCode, ProtocolError, Reason
from jobstream.protocol.events import (
    KIND_TO_TYPE,
    ONCE_PER_JOB_KINDS,
    TERMINAL_KINDS,
    EventKind,
    event_id,
)
from jobstream.runtime import Runtime
from jobstream.service import admission, callbacks, endpoints, execution, jobs
from jobstream.service import events as stream
from jobstream.service.liveness import verdict
from jobstream.service.sweep import sweep
from jobstream.store import keys, listed
from jobstream.store.client import dynamodb_client
from jobstream.store.codec import from_item, to_item
from jobstream.store.jobs import MAX_CALLBACK_ATTEMPTS, JobStore, item_to_record
from jobstream.store.records import with_parts
from jobstream.store.sweep_index import record_legacy_shards_retired
from jobstream_local.resources import create_tables
from jobstream_local.template import Template
from tests.support.harness import Clock, canonical_task
from tests.support.state import whole_table

TENANTS = ("acme", "globex")
KEYS = ("key-1", "key-2", "key-3")
WORKERS = ("worker-a", "worker-b")
INTENT_STATES = {
    CallbackState.PENDING,
    CallbackState.IN_FLIGHT,
    CallbackState.RETRY_WAIT,
    CallbackState.DELIVERED,
    CallbackState.DEAD,
}
FINAL_INTENT_STATES = {CallbackState.DELIVERED, CallbackState.DEAD}
GARBAGE_IDS = ("garbage", "evt-", "evt-abc-1", "evt-0-1", "evt-1-0", "evt-99999999999999-999999")
# Large steps cross the lease (3 min), the stall and the deadline (15 min), the queued
# budget (30 min) and the longest callback back-off (6 h).
LARGE_STEPS = (180_001, 900_001, 1_200_001, 1_800_001, 21_600_001)

Item = dict[str, Any]
Snapshot = dict[tuple[str, str], Item]


WRITES = frozenset(
    {
        "put_item",
        "update_item",
        "delete_item",
        "transact_write_items",
        "batch_write_item",
        "call_built",
    }
)


class WatchedClient:
    """The DynamoDB client, telling the world whenever a call may have written."""

    def __init__(self, client: Any, on_write: Callable[[], None]) -> None:
        self._client = client
        self._on_write = on_write

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name not in WRITES:
            return attribute

        def write(*args: Any, **kwargs: Any) -> Any:
            self._on_write()
            try:
                return attribute(*args, **kwargs)
            finally:
                self._on_write()

        return write


@functools.cache
def template() -> Template:
    return Template.load()


@dataclass
class JobModel:
    tenant: str
    key: str
    job_id: str
    task: dict[str, Any]
    callback: bool


@dataclass
class JobView:
    """One job as the table holds it: the job item, its events, the callbacks they carry, and
    its ack cursor and result items (`parts`)."""

    item: Item
    record: JobRecord
    events: list[StoredEvent] = field(default_factory=list)
    intents: list[dict[str, Any]] = field(default_factory=list)
    event_items: list[dict[str, Any]] = field(default_factory=list)
    parts: list[Item] = field(default_factory=list)


@functools.cache
def _listing_projection() -> frozenset[str]:
    """What the tenant index holds of an item: its keys and projected attributes."""
    (index,) = [
        index
        for index in template().table_indexes("JobsTable")
        if index["IndexName"] == keys.TENANT_INDEX
    ]
    return frozenset(
        {keys.PK, keys.SK, "gsi1pk", "gsi1sk", *index["Projection"]["NonKeyAttributes"]}
    )


def conflicting(task: dict[str, Any]) -> dict[str, Any]:
    """The same Task with other params (still admissible): a replay of it must be a 409."""
    other = copy.deepcopy(task)
    other["params"]["constraints"]["limit"] = other["params"]["constraints"]["limit"] + 1
    return other


class World:
    """The services on a fresh table, the model the invariants are checked against, and the
    invariant checker itself."""

    def __init__(self, base: Runtime) -> None:
        table = f"sm-{uuid.uuid4().hex[:10]}"
        create_tables(template(), boto3.client("dynamodb"), name_for=lambda _: table)
        record_legacy_shards_retired(boto3.client("dynamodb"), table, now=0)
        self.clock = Clock()
        client = WatchedClient(dynamodb_client(), self._written)
        self.rt = replace(
            base,
            settings=base.settings.model_copy(update={"table_name": table}),
            store=JobStore(table, client_factory=lambda: client),
            clock=self.clock,
            poster=self._post,
        )
        self.jobs: dict[tuple[str, str], JobModel] = {}
        self.leases: dict[tuple[str, str], execution.Lease] = {}
        self.poster_status = 204
        self.posts: list[dict[str, Any]] = []
        # What earlier checks saw, for the "never changes" parts of the invariants.
        self.seen: dict[str, dict[int, tuple[str, int]]] = {}
        self.best_ack: dict[str, int] = {}
        self.final_intents: dict[tuple[str, int], str] = {}
        # The last scan, kept until something writes (scans dominate the run time).
        self._cached: Snapshot | None = None
        self._views: tuple[Snapshot, dict[str, JobView]] | None = None

    def _written(self) -> None:
        self._cached = None

    # -- the fake receiver ------------------------------------------------------------------

    def _post(
        self, target: Any, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpResult:
        self.posts.append(json.loads(body))
        return HttpResult(status=self.poster_status, body_excerpt="", retry_after=None)

    # -- reading the table ------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every item of the table, by key (a copy: callers compare before and after)."""
        if self._cached is None:
            self._cached = whole_table(self.rt)
        # Shared, never mutated: callers compare snapshots, they do not edit them.
        return self._cached

    def views(self) -> dict[str, JobView]:
        snapshot = self.snapshot()
        if self._views is not None and self._views[0] is snapshot:
            return self._views[1]
        views: dict[str, JobView] = {}
        for (pk, sk), item in sorted(snapshot.items()):
            job_id = pk.removeprefix("JOB#")
            if sk == keys.JOB_SK:
                views[job_id] = JobView(item=item, record=item_to_record(item))
        for (pk, sk), item in sorted(snapshot.items()):
            if pk.startswith("ENDPOINT#") or pk == keys.LEGACY_SHARDS_PK:
                # A callback endpoint's health (store/endpoints.py), the record of the sweep
                # index's retired shards (store/sweep_index.py): no job's items.
                continue
            job_id = pk.removeprefix("JOB#")
            assert job_id in views, f"an item {sk} of no job {job_id}"
            if sk == keys.JOB_SK:
                continue
            if sk in (keys.ACK_SK, keys.RESULT_SK):
                views[job_id].parts.append(item)
            elif sk.startswith(keys.EVENT_PREFIX):
                values = from_item(item)
                sequence = keys.sequence_of(sk)
                views[job_id].events.append(
                    StoredEvent(job_id, sequence, values["kind"], values["at"])
                )
                views[job_id].event_items.append(values)
                if "state" in values:
                    # The callback the event carries, with what is derived from the event.
                    views[job_id].intents.append(
                        {
                            **values,
                            "sequence": sequence,
                            "event_id": event_id(job_id, values["at"], sequence),
                            "max_attempts": MAX_CALLBACK_ATTEMPTS,
                        }
                    )
            else:
                raise AssertionError(f"an item {sk} of job {job_id} of no known kind")
        for view in views.values():
            view.record = with_parts(view.record, view.parts)
        self._views = (snapshot, views)
        return views

    def view(self, job_id: str) -> JobView:
        return self.views()[job_id]

    def ids(self, job_id: str) -> list[str]:
        return [event_id(job_id, e.at, e.sequence) for e in self.view(job_id).events]

    # -- the invariants ---------------------------------------------------------------------

    def check(self) -> None:
        views = self.views()
        # I6: one job per (tenant, key), named by both, and nothing else in the table.
        assert set(views) == {model.job_id for model in self.jobs.values()}
        for (tenant, key), model in self.jobs.items():
            assert model.job_id == derive_job_id(tenant, key)
            self.check_job(model, views[model.job_id])

    def check_job(self, model: JobModel, view: JobView) -> None:
        record, events = view.record, view.events
        job_id = model.job_id
        assert (record.tenant, record.idempotency_key) == (model.tenant, model.key)
        # I1: never empty; it starts with job.accepted.
        assert events, f"{job_id} has no events"
        assert events[0].kind == EventKind.REQUESTED
        # I3: positions 1..n, `at` never decreases, the job's counters agree.
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        ats = [e.at for e in events]
        assert ats == sorted(ats), f"`at` decreases in {job_id}: {ats}"
        assert record.event_count == len(events)
        assert record.last_event_at == events[-1].at
        kinds = [e.kind for e in events]
        assert all(KIND_TO_TYPE.get(EventKind(kind)) is not None for kind in kinds)
        # I2: each lifecycle kind at most once, and the job's recorded set says the same.
        lifecycle = [kind for kind in kinds if kind in ONCE_PER_JOB_KINDS]
        assert len(lifecycle) == len(set(lifecycle)), f"{job_id}: {kinds}"
        assert record.recorded_kinds & ONCE_PER_JOB_KINDS == set(lifecycle)
        # I1: a terminal job has exactly one terminal event, the last, of its status.
        terminal = [kind for kind in kinds if kind in TERMINAL_KINDS]
        if record.is_terminal:
            assert terminal == [TERMINAL_KIND_BY_STATUS[record.status].value], kinds
            assert kinds[-1] == terminal[0]
            # Among the open jobs until nothing needs its cover (store/jobs.py `leave_active`),
            # and in no other backlog.
            assert "sweep_pk" not in view.item or self.in_open_jobs(view)
            assert record.lease_owner is None
        else:
            assert terminal == [], f"{record.status} job {job_id} has {terminal}"
            assert keys.sweep_kind(view.item["sweep_pk"]["S"]) == keys.SweepBacklog.ACTIVE_JOBS
        # I6: one execution at a time, started once (iff job.started was recorded); a run whose
        # worker stopped is followed by the next attempt, up to the target's max_attempts.
        assert record.attempt <= DEFAULT_MAX_ATTEMPTS
        assert (record.started_at is not None) == (EventKind.EXECUTION_STARTED in kinds)
        # I3: an event id always names the same event.
        seen = self.seen.setdefault(job_id, {})
        for stored in events:
            known = seen.setdefault(stored.sequence, (stored.kind, stored.at))
            assert known == (stored.kind, stored.at), f"event {stored.sequence} of {job_id} changed"
        assert len(seen) == len(events), f"events of {job_id} disappeared"
        # I4: the cursor stays within the stream and never moves back.
        assert 0 <= record.ack_sequence <= record.event_count
        assert record.ack_sequence >= self.best_ack.get(job_id, 0)
        self.best_ack[job_id] = record.ack_sequence
        self.check_intents(model, view)
        self.check_retention(view)
        self.check_listed(view)

    def check_listed(self, view: JobView) -> None:
        """A listing shows the job as GET does: its entry in the tenant's index, where it can
        show the job (store/listed.py), makes the same document as the job item."""
        record = view.record
        entry = {name: value for name, value in view.item.items() if name in _listing_projection()}
        shown = listed.view(entry)
        if shown is None:
            # Only a running job, or labels kept off the index, send a listing to the table.
            assert record.status == "running" or listed.UNLISTED_LABELS in view.item
            return
        now = self.rt.clock()
        as_listed = documents.job_document(
            replace(shown, result=record.result), now, words=registry
        )
        assert as_listed == documents.job_document(record, now, words=registry)

    def check_retention(self, view: JobView) -> None:
        """Retention: every item but the job item carries the expiry it took when written (from
        the job's deadline), never before the job's, and an open callback's lasts beyond its
        retries; an open job item carries none, a finished one its own (from its terminal
        event's time)."""
        record, ttl, settings = view.record, keys.TTL_ATTRIBUTE, self.rt.settings
        items_expire = item_expiry(record, settings)
        for values in view.event_items:
            assert values.get(ttl) == items_expire, values
        for part in view.parts:
            assert from_item(part).get(ttl) == items_expire, part
        span = callback_span_ms(settings)
        for intent in view.intents:
            if intent["state"] not in FINAL_INTENT_STATES:
                assert items_expire * 1000 >= intent["at"] + span, f"open {intent} may expire"
        if not record.is_terminal:
            assert ttl not in view.item
            return
        assert record.expires_at == job_expiry(record, view.events[-1].at, settings)
        assert record.expires_at <= items_expire

    def check_intents(self, model: JobModel, view: JobView) -> None:
        """I5: one intent per event of a job with a callback URL, in a known state."""
        if not model.callback:
            assert view.record.callback_url is None
            assert view.intents == []
            return
        assert view.record.callback_url == model.task["callback_url"]
        assert [i["sequence"] for i in view.intents] == [e.sequence for e in view.events]
        for intent, stored in zip(view.intents, view.events, strict=True):
            assert intent["event_id"] == event_id(model.job_id, stored.at, stored.sequence)
            assert intent["kind"] == stored.kind
            assert intent["state"] in INTENT_STATES
            assert intent.get("attempts", 0) <= intent["max_attempts"] <= MAX_CALLBACK_ATTEMPTS
            ref = (model.job_id, stored.sequence)
            if ref in self.final_intents:
                assert intent["state"] == self.final_intents[ref], f"intent {ref} reopened"
            if intent["state"] in FINAL_INTENT_STATES:
                self.final_intents[ref] = intent["state"]
            if intent["state"] == CallbackState.DELIVERED:
                assert "sweep_pk" not in intent
            elif intent["state"] == CallbackState.DEAD:
                assert keys.sweep_kind(intent["sweep_pk"]) == keys.SweepBacklog.CALLBACK_DEAD
            elif "sweep_pk" in intent:
                assert keys.sweep_kind(intent["sweep_pk"]) == keys.SweepBacklog.CALLBACK_HANDOFF
            else:
                # I5: an open callback without an entry of its own is covered by its job: the
                # job is among the open jobs (JOB#ACTIVE), ended or not, or its terminal
                # callback is open in the hand-off shards (service/callback_coverage.py).
                assert intent["state"] in {CallbackState.PENDING, CallbackState.IN_FLIGHT}
                assert intent["kind"] not in TERMINAL_KINDS or self.in_open_jobs(view), (
                    f"terminal intent {ref} unwatched"
                )
                assert self.covered(view), f"open intent {ref} of {model.job_id} has no cover"
            if intent["kind"] in TERMINAL_KINDS and intent["state"] in OPEN_CALLBACK_STATES:
                assert "sweep_pk" in intent or self.in_open_jobs(view), (
                    f"open terminal intent {ref} not in the sweep index"
                )

    @staticmethod
    def in_open_jobs(view: JobView) -> bool:
        """Whether the job item has its entry among the sweep's open jobs."""
        entry = view.item.get("sweep_pk", {}).get("S", "")
        return bool(entry) and keys.sweep_kind(entry) == keys.SweepBacklog.ACTIVE_JOBS

    @classmethod
    def covered(cls, view: JobView) -> bool:
        """Whether the job covers its callbacks that have no index entry of their own."""
        if not view.record.is_terminal:
            return keys.sweep_kind(view.item["sweep_pk"]["S"]) == keys.SweepBacklog.ACTIVE_JOBS
        if cls.in_open_jobs(view):
            return True
        return any(
            intent["kind"] in TERMINAL_KINDS
            and intent["state"] in OPEN_CALLBACK_STATES
            and keys.sweep_kind(intent.get("sweep_pk", "")) == keys.SweepBacklog.CALLBACK_HANDOFF
            for intent in view.intents
        )

    # -- helpers for rules ------------------------------------------------------------------

    def expect_error(
        self, call: Callable[[], object], status: int | None = None, code: ErrorCode | None = None
    ) -> ProtocolError:
        """I9: a ProtocolError with a 4xx status (no other exception), and nothing written."""
        before = self.snapshot()
        with pytest.raises(ProtocolError) as raised:
            call()
        error = raised.value
        assert 400 <= http_status(error) < 500, http_status(error)
        if status is not None:
            assert http_status(error) == status, (http_status(error), error.message)
        if code is not None:
            assert error.code == code, error.code
        assert self.snapshot() == before, "a refused request wrote to the table"
        return error


def without(snapshot: Snapshot, *drop: tuple[str, str]) -> Snapshot:
    return {k: v for k, v in snapshot.items() if k not in drop}


def without_endpoints(snapshot: Snapshot) -> Snapshot:
    """The snapshot without the callback endpoints' health items (store/endpoints.py)."""
    return {k: v for k, v in snapshot.items() if not k[0].startswith("ENDPOINT#")}


# What a terminal callback leaving the hand-off shards writes on its job's uncovered ones
# (service/callback_coverage.py, CallbackStore.watch): an entry of their own, and `resent_at`
# with it, so that the dispatcher does not take that write for a new callback.
COVER_ATTRIBUTES = frozenset({"sweep_pk", "sweep_sk", "resent_at"})
# What an ended job's leaving the open jobs removes from its item (store/jobs.py leave_active),
# once its terminal callback no longer needs its cover.
OPEN_JOB_ATTRIBUTES = frozenset({"sweep_pk", "sweep_sk", keys.PENDING_EVENT})


def without_sweep_entries(snapshot: Snapshot) -> Snapshot:
    """The snapshot without what the cover writes on the events (COVER_ATTRIBUTES) and on an
    ended job's item (OPEN_JOB_ATTRIBUTES)."""
    return {k: _without_cover(k, v) for k, v in snapshot.items()}


def _without_cover(key: tuple[str, str], item: dict[str, Any]) -> dict[str, Any]:
    if key[1].startswith(keys.EVENT_PREFIX):
        return {name: value for name, value in item.items() if name not in COVER_ATTRIBUTES}
    if key[1] == keys.JOB_SK and "expires_at" in item:  # an ended job (store/jobs.py)
        return {name: value for name, value in item.items() if name not in OPEN_JOB_ATTRIBUTES}
    return item


def job_key(job_id: str) -> tuple[str, str]:
    return (keys.job_pk(job_id), keys.JOB_SK)


picks = st.integers(0, 63)
whos = st.sampled_from(("holder", "holder", *WORKERS))


class ServiceMachine(RuleBasedStateMachine):
    """Set `base` (the test's Runtime) on a subclass; each run gets its own table."""

    base: ClassVar[Runtime]

    def __init__(self) -> None:
        super().__init__()
        self.world = World(self.base)
        self.rt = self.world.rt

    # -- choosing ---------------------------------------------------------------------------

    def has_jobs(self) -> bool:
        return bool(self.world.jobs)

    def job(self, pick: int) -> JobModel:
        models = sorted(self.world.jobs.values(), key=lambda m: m.job_id)
        return models[pick % len(models)]

    def record(self, job_id: str) -> JobRecord:
        """The job as the table holds it now (from the last scan while nothing wrote)."""
        return self.world.view(job_id).record

    def foreign_id(self, model: JobModel, pick: int) -> str | None:
        others = [m for m in self.world.jobs.values() if m.job_id != model.job_id]
        if not others:
            return None
        other = others[pick % len(others)]
        ids = self.world.ids(other.job_id)
        return ids[pick % len(ids)]

    # -- admission --------------------------------------------------------------------------

    @initialize(tenant=st.sampled_from(TENANTS), key=st.sampled_from(KEYS), callback=st.booleans())
    def first_job(self, tenant: str, key: str, callback: bool) -> None:
        # Most rules need a job: every run starts with one.
        self.submit(tenant, key, callback)

    @rule(tenant=st.sampled_from(TENANTS), key=st.sampled_from(KEYS), callback=st.booleans())
    def submit(self, tenant: str, key: str, callback: bool) -> None:
        existing = self.world.jobs.get((tenant, key))
        task = existing.task if existing else canonical_task(idempotency_key=key)
        if existing is None and not callback:
            task["callback_url"] = None
        before = self.world.snapshot()
        status, body = admission.submit(self.rt, tenant, task, None)
        job_id = body["job"]["job_id"]
        if existing is None:
            assert status == 202
            self.world.jobs[(tenant, key)] = JobModel(tenant, key, job_id, task, callback)
        else:
            # I6: a replay answers the same job and records nothing.
            assert (status, job_id) == (200, existing.job_id)
            assert self.world.snapshot() == before

    @precondition(has_jobs)
    @rule(pick=picks, callback=st.booleans())
    def replay(self, pick: int, callback: bool) -> None:
        model = self.job(pick)
        task = copy.deepcopy(model.task)
        # Not compared on replay; a different callback_url does not change the job.
        task["callback_url"] = (
            "https://other.example.test/hooks" if callback and not model.callback else None
        )
        before = self.world.snapshot()
        status, body = admission.submit(self.rt, model.tenant, task, None)
        assert (status, body["job"]["job_id"]) == (200, model.job_id)
        assert self.world.snapshot() == before

    @precondition(has_jobs)
    @rule(pick=picks)
    def conflicting_replay(self, pick: int) -> None:
        model = self.job(pick)
        task = conflicting(model.task)
        self.world.expect_error(
            lambda: admission.submit(self.rt, model.tenant, task, None),
            status=409,
            code=ErrorCode.IDEMPOTENCY_CONFLICT,
        )

    # -- workers ----------------------------------------------------------------------------

    @precondition(has_jobs)
    @rule(pick=picks, worker=st.sampled_from(WORKERS))
    def claim(self, pick: int, worker: str) -> None:
        model = self.job(pick)
        before = self.record(model.job_id)
        claimed = execution.claim(self.rt, model.job_id, worker)
        after = self.record(model.job_id)
        event(f"claim: {before.status} -> {after.status}")
        if before.status == "queued":
            assert claimed is not None
            assert (after.status, after.lease_owner, after.attempt) == ("running", worker, 1)
            assert claimed.event_count == after.event_count
            self.world.leases[(model.job_id, worker)] = execution.Lease(self.rt, claimed, worker)
        elif before.status == "running" and before.lease_owner == worker:
            # The same owner again: it resumes the job it holds, as its item holds it (a claim
            # reads the job item alone, not the ack cursor or result).
            assert claimed == self.rt.store.get_job_item(model.job_id)
            assert after == before
        elif before.status == "running" and not before.lease_active(self.world.clock.now):
            if before.attempt >= DEFAULT_MAX_ATTEMPTS:
                # Its runs keep stopping unfinished: no more of them, it ends expired.
                assert claimed is None
                assert (after.status, after.reason) == ("expired", "stalled_no_heartbeat")
                assert after.event_count == before.event_count + 1
                return
            # A lease that has ended (its worker gone): the job runs again as its next attempt
            # under this worker, with no second start (I6: one execution at a time).
            assert claimed == self.rt.store.get_job_item(model.job_id)
            assert (after.status, after.lease_owner) == ("running", worker)
            assert (after.attempt, after.event_count) == (before.attempt + 1, before.event_count)
            self.world.leases[(model.job_id, worker)] = execution.Lease(self.rt, claimed, worker)
        else:
            # I6: one execution; a second claim is a no-op.
            assert claimed is None
            assert after == before

    def worker_for(self, pick: int, who: str) -> tuple[str, str]:
        """A job and a worker: the holder of a lease, or a named worker on any job."""
        held = self.held()
        if who == "holder" and held:
            return held[pick % len(held)]
        return self.job(pick).job_id, who if who in WORKERS else WORKERS[0]

    @precondition(has_jobs)
    @rule(pick=picks, who=whos)
    def heartbeat(self, pick: int, who: str) -> None:
        job_id, worker = self.worker_for(pick, who)
        before = self.record(job_id)
        snapshot = self.world.snapshot()
        now = self.world.clock.now
        alive = self.rt.store.renew_lease(
            job_id, worker, now=now, lease_ms=self.rt.settings.lease_ms
        )
        event(f"heartbeat: {alive}")
        assert alive == (before.status == "running" and before.lease_owner == worker)
        after = self.record(job_id)
        if alive:
            assert (after.heartbeat_at, after.lease_expires_at) == (
                now,
                now + self.rt.settings.lease_ms,
            )
        else:
            assert after == before
        # A heartbeat touches the job item only.
        key = job_key(job_id)
        assert without(self.world.snapshot(), key) == without(snapshot, key)

    def held(self) -> list[tuple[str, str]]:
        """The (job, worker) pairs whose lease is still held (the job is running for it)."""
        views = self.world.views()
        return [
            (job_id, worker)
            for job_id, worker in sorted(self.world.leases)
            if views[job_id].record.status == "running"
            and views[job_id].record.lease_owner == worker
        ]

    @precondition(lambda self: bool(self.world.leases))
    @rule(
        pick=picks,
        stage=st.sampled_from(["searching", "ranking"]),
        message=st.booleans(),
        live=st.booleans(),
    )
    def progress(self, pick: int, stage: str, message: bool, live: bool) -> None:
        """Progress from a worker holding its lease, or (not `live`) any worker that claimed."""
        pairs = (live and self.held()) or sorted(self.world.leases)
        job_id, worker = pairs[pick % len(pairs)]
        lease = self.world.leases[(job_id, worker)]
        before = self.record(job_id)
        now = self.world.clock.now
        # Within 5 s of the job's last event (its start, or the last progress) none is written.
        recent = now - lease._last_event_at < execution.PROGRESS_MIN_INTERVAL_MS
        mine = before.status == "running" and before.lease_owner == worker
        fresh = lease.record.event_count == before.event_count
        lease.progress(stage, "looking" if message else None)
        after = self.record(job_id)
        event(f"progress: {after.progress_events - before.progress_events}")
        if mine and fresh and not recent and before.progress_events < execution.MAX_PROGRESS_EVENTS:
            assert after.event_count == before.event_count + 1
            assert after.progress_events == before.progress_events + 1
            assert self.world.view(job_id).events[-1].kind == EventKind.PROGRESSED
        elif not mine or recent:
            # A cancelled, expired or finished job gets no progress; a report too soon after
            # the last event writes nothing (the lease's next heartbeat shows it).
            assert after == before

    @precondition(has_jobs)
    @rule(pick=picks, who=whos)
    def complete(self, pick: int, who: str) -> None:
        outcome = Outcome(result={"candidates": [], "scanned": 0})
        self._finish(*self.worker_for(pick, who), outcome, "succeeded")

    @precondition(has_jobs)
    @rule(pick=picks, who=whos)
    def fail(self, pick: int, who: str) -> None:
        outcome = Outcome(reason=Reason.INTERNAL_ERROR, message="the executor crashed")
        self._finish(*self.worker_for(pick, who), outcome, "failed")

    def _finish(self, job_id: str, worker: str, outcome: Outcome, status: str) -> None:
        before = self.record(job_id)
        snapshot = self.world.snapshot()
        lease = self.world.leases.get((job_id, worker))
        # A worker that never claimed the job completes from what it reads.
        held = lease.record if lease is not None else before
        result = execution.complete(self.rt, held, worker, outcome)
        event(f"complete: {result}")
        after = self.record(job_id)
        if before.status == "running" and before.lease_owner == worker:
            assert result == status
            assert (after.status, after.lease_owner) == (status, None)
            assert self.world.view(job_id).events[-1].kind == (
                TERMINAL_KIND_BY_STATUS[status].value
            )
        else:
            # A cancelled, expired, finished or foreign-leased job gets no later outcome. A
            # worker that still believed it held the job wrote its result first: never shown.
            assert result == "lost"
            key = (keys.job_pk(job_id), keys.RESULT_SK)
            assert without(self.world.snapshot(), key) == without(snapshot, key)
            assert after == before

    # -- consumer routes --------------------------------------------------------------------

    @precondition(has_jobs)
    @rule(pick=picks)
    def cancel(self, pick: int) -> None:
        model = self.job(pick)
        before = self.record(model.job_id)
        snapshot = self.world.snapshot()
        document = jobs.cancel(self.rt, model.tenant, model.job_id, None)
        after = self.record(model.job_id)
        if before.is_terminal:
            # Idempotent: a finished job is returned unchanged.
            assert document["status"] == before.status
            assert self.world.snapshot() == snapshot
        else:
            assert document["status"] == after.status == "cancelled"
            assert (after.lease_owner, after.lease_expires_at) == (None, None)

    @precondition(has_jobs)
    @rule(
        pick=picks,
        after=st.sampled_from(["none", "unacked", "real", "foreign", "garbage"]),
        which=picks,
    )
    def page(self, pick: int, after: str, which: int) -> None:
        model = self.job(pick)
        ids = self.world.ids(model.job_id)
        record = self.record(model.job_id)
        query: dict[str, list[str]] = {}
        named: str | None = None
        if after == "unacked":
            query["unacked"] = ["1"]
        elif after == "real":
            named = ids[which % len(ids)]
        elif after == "foreign":
            named = self.foreign_id(model, which) or GARBAGE_IDS[which % len(GARBAGE_IDS)]
        elif after == "garbage":
            named = GARBAGE_IDS[which % len(GARBAGE_IDS)]
        if named is not None:
            query["after"] = [named]
        snapshot = self.world.snapshot()
        result = stream.events_page(self.rt, model.tenant, model.job_id, query, None)
        # Reading writes nothing (the stream is already complete).
        assert self.world.snapshot() == snapshot
        if after == "unacked":
            expected = ids[record.ack_sequence :]
        elif named in ids:
            # An id that names this job's event pages after it (another job's never does:
            # ids are unique across jobs); anything else replays from the start.
            expected = ids[ids.index(named) + 1 :]
        else:
            expected = ids
        assert [event["event_id"] for event in result["events"]] == expected
        # I1: an existing job's full page is never empty.
        if after == "none":
            assert result["events"]
        events = {
            event_id(model.job_id, e.at, e.sequence): e
            for e in self.world.view(model.job_id).events
        }
        for document in result["events"]:
            stored = events[document["event_id"]]
            assert document["type"] == KIND_TO_TYPE[EventKind(stored.kind)]
            assert document["at"] == stored.at
            assert document["job_id"] == model.job_id
        assert result["unacked"] == record.event_count - record.ack_sequence

    @precondition(has_jobs)
    @rule(pick=picks, kind=st.sampled_from(["valid", "older", "foreign", "garbage"]), which=picks)
    def ack(self, pick: int, kind: str, which: int) -> None:
        model = self.job(pick)
        ids = self.world.ids(model.job_id)
        before = self.record(model.job_id)
        if kind == "valid":
            named = ids[which % len(ids)]
        elif kind == "older":
            named = ids[max(0, before.ack_sequence - 1 - which % 2)]
        elif kind == "foreign":
            named = self.foreign_id(model, which) or GARBAGE_IDS[which % len(GARBAGE_IDS)]
        else:
            named = GARBAGE_IDS[which % len(GARBAGE_IDS)]
        expected = before.ack_sequence
        if named in ids:
            expected = max(expected, ids.index(named) + 1)
        snapshot = self.world.snapshot()
        for _ in range(2):  # idempotent: the same ack twice reports the same state
            result = stream.acknowledge(
                self.rt, model.tenant, model.job_id, {"ack_through": named}, None
            )
            assert result["acked"] == expected, (named, ids, before.ack_sequence, result)
            assert result["acked"] + result["unacked"] == before.event_count
        after = self.record(model.job_id)
        # I4: ack moves the cursor and nothing else.
        assert after == replace(before, ack_sequence=expected)
        key = (keys.job_pk(model.job_id), keys.ACK_SK)
        assert without(self.world.snapshot(), key) == without(snapshot, key)

    @precondition(lambda self: any(m.callback for m in self.world.jobs.values()))
    @rule(pick=picks, which=picks, status=st.sampled_from([204, 503, 404]))
    def deliver(self, pick: int, which: int, status: int) -> None:
        with_callback = [m for m in self.world.jobs.values() if m.callback]
        model = sorted(with_callback, key=lambda m: m.job_id)[pick % len(with_callback)]
        view = self.world.view(model.job_id)
        intent = view.intents[which % len(view.intents)]
        ref = IntentRef(model.job_id, intent["sequence"])
        item_key = (keys.job_pk(model.job_id), keys.event_sk(ref.sequence))
        now = self.world.clock.now
        claimable = (
            intent["state"] in {CallbackState.PENDING, CallbackState.RETRY_WAIT}
            and intent["next_attempt_at"] <= now
        ) or (intent["state"] == CallbackState.IN_FLIGHT and intent["lease_until"] < now)
        snapshot = self.world.snapshot()
        posts = len(self.world.posts)
        self.world.poster_status = status
        callbacks.deliver(self.rt, ref)
        # I7: the outcome touches the callback's item only, never the job or other events (the
        # event itself: `seen` in check_job); its endpoint's health is an item of its own, and
        # other callbacks' sweep entries are their cover (check_intents).
        assert without_sweep_entries(
            without_endpoints(without(self.world.snapshot(), item_key))
        ) == without_sweep_entries(without_endpoints(without(snapshot, item_key)))
        after = self.rt.callbacks.get(ref)
        assert after is not None
        event(f"deliver: {after.state if claimable else 'not due'}")
        if not claimable:
            assert len(self.world.posts) == posts
            assert self.world.snapshot() == snapshot
            return
        assert len(self.world.posts) == posts + 1
        assert self.world.posts[-1]["event_id"] == intent["event_id"]
        assert after.attempts == intent["attempts"] + 1
        if status == 204:
            assert after.state == CallbackState.DELIVERED
        elif status == 404 or after.attempts >= MAX_CALLBACK_ATTEMPTS:
            assert after.state == CallbackState.DEAD
        else:
            assert after.state == CallbackState.RETRY_WAIT
            assert after.next_attempt_at > now

    @precondition(has_jobs)
    @rule(pick=picks, op=st.sampled_from(["get", "page", "ack", "cancel"]))
    def foreign_tenant(self, pick: int, op: str) -> None:
        """I8: another tenant's job does not exist for the caller."""
        model = self.job(pick)
        other = next(t for t in TENANTS if t != model.tenant)
        some_id = self.world.ids(model.job_id)[-1]
        calls: dict[str, Callable[[], object]] = {
            "get": lambda: jobs.get_job(self.rt, other, model.job_id, None),
            "page": lambda: stream.events_page(self.rt, other, model.job_id, {}, None),
            "ack": lambda: stream.acknowledge(
                self.rt, other, model.job_id, {"ack_through": some_id}, None
            ),
            "cancel": lambda: jobs.cancel(self.rt, other, model.job_id, None),
        }
        self.world.expect_error(calls[op], status=404)

    @rule(tenant=st.sampled_from(TENANTS), key=st.sampled_from(KEYS))
    def listing(self, tenant: str, key: str) -> None:
        """I8 and I6 in listings: only the caller's jobs, one per key."""
        mine = {m.job_id for m in self.world.jobs.values() if m.tenant == tenant}
        page = jobs.list_jobs(self.rt, tenant, {}, None)
        assert {job["job_id"] for job in page["jobs"]} == mine
        assert len(page["jobs"]) == len(mine)
        by_key = jobs.list_jobs(self.rt, tenant, {"idempotency_key": [key]}, None)
        model = self.world.jobs.get((tenant, key))
        assert [job["job_id"] for job in by_key["jobs"]] == ([model.job_id] if model else [])

    @rule(pick=picks, bad=st.integers(0, 12))
    def bad_input(self, pick: int, bad: int) -> None:
        """I9: every bad input is a 4xx ProtocolError and writes nothing."""
        tenant = TENANTS[pick % 2]
        job_id, owner = derive_job_id(tenant, "none"), tenant
        if self.world.jobs:
            job_id, owner = self.job(pick).job_id, self.job(pick).tenant

        def task(**overrides: Any) -> dict[str, Any]:
            return canonical_task(**{"idempotency_key": KEYS[pick % len(KEYS)], **overrides})

        calls: list[Callable[[], object]] = [
            lambda: admission.submit(self.rt, tenant, task(protocol_version="9"), None),
            lambda: admission.submit(self.rt, tenant, task(idempotency_key="  "), None),
            lambda: admission.submit(self.rt, tenant, task(params="nope"), None),
            lambda: admission.submit(self.rt, tenant, ["not", "a", "task"], None),
            lambda: admission.submit(
                self.rt, tenant, task(callback_url="http://consumer.example.test/x"), None
            ),
            lambda: stream.events_page(self.rt, owner, job_id, {"unacked": ["maybe"]}, None),
            lambda: stream.events_page(self.rt, owner, job_id, {"after": [""]}, None),
            lambda: stream.acknowledge(self.rt, owner, job_id, ["evt-1-1"], None),
            lambda: stream.acknowledge(self.rt, owner, job_id, {"ack_through": 3}, None),
            lambda: jobs.list_jobs(self.rt, tenant, {"status": ["bogus"]}, None),
            lambda: jobs.list_jobs(self.rt, tenant, {"limit": ["0"]}, None),
            lambda: jobs.list_jobs(self.rt, tenant, {"cursor": ["garbage"]}, None),
            lambda: jobs.get_job(self.rt, tenant, "job_does-not-exist", None),
        ]
        self.world.expect_error(calls[bad])

    # -- the back end -----------------------------------------------------------------------

    @rule()
    def run_sweep(self) -> None:
        report = sweep(self.rt)
        for reason in report.expired:
            event(f"sweep: {reason.value}")
        assert report.errors == 0
        # Nothing was missing from any stream, and every verdict due has been issued.
        assert report.events_repaired == 0
        now = self.world.clock.now
        for model in self.world.jobs.values():
            record = self.record(model.job_id)
            assert verdict(record, now, self.rt.settings) is None, (record.status, now)

    @rule(ms=st.integers(1, 10_000))
    def advance_small(self, ms: int) -> None:
        self.world.clock.advance(ms)

    @rule(ms=st.sampled_from(LARGE_STEPS))
    def advance_large(self, ms: int) -> None:
        self.world.clock.advance(ms)

    @invariant()
    def invariants_hold(self) -> None:
        self.world.check()


MACHINE_SETTINGS = settings(
    max_examples=25,
    stateful_step_count=30,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)


def test_services_keep_the_invariants_in_any_history(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every job calls back to one origin: its endpoint is never paused here (a paused endpoint
    # parks callbacks instead of attempting them: test_endpoint_health.py), so that the model's
    # delivery rule stays the callback's own.
    monkeypatch.setattr(endpoints, "PAUSE_AFTER_FAILURES", 10**9)

    class Machine(ServiceMachine):
        base = rt

    run_state_machine_as_test(Machine, settings=MACHINE_SETTINGS)


def test_the_checker_catches_a_duplicate_terminal_event(rt: Runtime) -> None:
    """The test of the test: a corrupted stream must fail the invariant check."""
    world = World(rt)
    task = canonical_task(idempotency_key="key-1")
    _, body = admission.submit(world.rt, "acme", task, None)
    job_id = body["job"]["job_id"]
    world.jobs[("acme", "key-1")] = JobModel("acme", "key-1", job_id, task, callback=True)
    jobs.cancel(world.rt, "acme", job_id, None)
    world.check()  # sound so far
    record = world.rt.store.get_job(job_id)
    assert record is not None
    # A second job.cancelled, written past the stream's end, as a buggy writer would.
    world.rt.store.client.put_item(
        TableName=world.rt.settings.table_name,
        Item=to_item(
            {
                keys.PK: keys.job_pk(job_id),
                keys.SK: keys.event_sk(record.event_count + 1),
                "kind": EventKind.OUTCOME_CANCELLED.value,
                "at": record.last_event_at,
            }
        ),
    )
    with pytest.raises(AssertionError):
        world.check()


def test_the_checker_catches_a_moved_ack_cursor(rt: Runtime) -> None:
    """A cursor that moves back (I4) fails the check too."""
    world = World(rt)
    task = canonical_task(idempotency_key="key-2", callback_url=None)
    _, body = admission.submit(world.rt, "globex", task, None)
    job_id = body["job"]["job_id"]
    world.jobs[("globex", "key-2")] = JobModel("globex", "key-2", job_id, task, callback=False)
    (first,) = world.ids(job_id)
    stream.acknowledge(world.rt, "globex", job_id, {"ack_through": first}, None)
    world.check()
    world.rt.store.client.update_item(
        TableName=world.rt.settings.table_name,
        Key=to_item({keys.PK: keys.job_pk(job_id), keys.SK: keys.ACK_SK}),
        UpdateExpression="SET ack_sequence = :zero",
        ExpressionAttributeValues=to_item({":zero": 0}),
    )
    with pytest.raises(AssertionError):
        world.check()


@pytest.mark.parametrize("corrupt", ["open callback", "earlier event", "open job"])
def test_the_checker_catches_a_wrong_expiry(rt: Runtime, corrupt: str) -> None:
    """Retention: an open callback that expires before its retries end, an event without an
    expiry, or an expiry on an open job fails the check."""
    world = World(rt)
    task = canonical_task(idempotency_key="key-3")
    _, body = admission.submit(world.rt, "acme", task, None)
    job_id = body["job"]["job_id"]
    world.jobs[("acme", "key-3")] = JobModel("acme", "key-3", job_id, task, callback=True)
    if corrupt != "open job":
        jobs.cancel(world.rt, "acme", job_id, None)
    world.check()
    key, update, when = {
        "open callback": (keys.event_sk(2), "SET expires_at = :when", world.clock.now // 1000),
        "earlier event": (keys.event_sk(1), "REMOVE expires_at", None),
        "open job": (keys.JOB_SK, "SET expires_at = :when", 2_000_000_000),
    }[corrupt]
    request: dict[str, Any] = {
        "TableName": world.rt.settings.table_name,
        "Key": to_item({keys.PK: keys.job_pk(job_id), keys.SK: key}),
        "UpdateExpression": update,
    }
    if when is not None:
        request["ExpressionAttributeValues"] = to_item({":when": when})
    world.rt.store.client.update_item(**request)
    with pytest.raises(AssertionError):
        world.check()
