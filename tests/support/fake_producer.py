"""A small, in-memory Workflow Protocol v1 producer on 127.0.0.1, for the SDK's and the
conformance kit's tests: another producer than jobstream (so the kit is seen to judge the
protocol, not our implementation), with switches that break it in chosen ways and a script of
canned answers (transient failures, Retry-After, dropped connections) for the client's retries.

Jobs run on the wall clock: `queued` for `queued_s`, then `running` for `run_s` (the target
`slow` runs for `slow_run_s`), then `succeeded` — or `failed` with `no_candidate` when a query tag
starts with `no-such`. Events are recorded when a read finds the job moved on.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

RETRYABLE = {
    "invalid_params": False,
    "idempotency_conflict": False,
    "unsupported_protocol_version": False,
    "auth_error": False,
    "internal_error": False,
    "resource_busy": True,
    "no_candidate": True,
    "cancelled_by_consumer": False,
}
TARGETS = {"demo", "slow"}
TERMINAL = {"succeeded", "failed", "cancelled", "expired"}

# Ways to break the producer, each against one protocol rule.
FAULTS = frozenset(
    {
        "replay_202",  # a replay answers 202 instead of 200
        "conflict_replays",  # same key, other params: a replay instead of 409
        "plain_401",  # 401 without the error envelope
        "tenant_leak",  # another tenant's job is readable, cancellable, ackable
        "ack_rewinds",  # an older ack_through moves the cursor back
        "no_terminal_event",  # a finished job's stream never gets its terminal event
        "string_timestamps",  # created_at as a string: not a protocol Job
        "retryable_400",  # request errors claim retryable: true
        "unknown_job_200",  # an unknown job id answers 200 with an empty job
    }
)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class FakeJob:
    job_id: str
    tenant: str
    key: str
    params: dict[str, Any]
    created_at: int
    run_ms: int
    outcome: str
    correlation_id: str | None = None
    labels: dict[str, str] | None = None
    status: str = "queued"
    started_at: int | None = None
    updated_at: int = 0
    error: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    ack_position: int = 0


@dataclass
class Canned:
    """One scripted answer: a status, headers and body — or `drop` the connection unanswered."""

    status: int = 503
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    path_prefix: str = ""


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeProducer:
    def __init__(
        self,
        *,
        tokens: dict[str, str] | None = None,
        faults: frozenset[str] = frozenset(),
        queued_s: float = 0.05,
        run_s: float = 0.2,
        slow_run_s: float = 60.0,
        page_size: int = 200,
        several_targets: bool = False,
    ) -> None:
        unknown = faults - FAULTS
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}")
        self.tokens = tokens or {"token-a": "tenant-a", "token-b": "tenant-b"}
        self.faults = faults
        self.queued_ms = int(queued_s * 1000)
        self.run_ms = int(run_s * 1000)
        self.slow_run_ms = int(slow_run_s * 1000)
        self.page_size = page_size
        # Configured with several targets, as jobstream ships: a Task must name one.
        self.several_targets = several_targets
        self.jobs: dict[str, FakeJob] = {}
        self.script: list[Canned] = []
        self.requests: list[Seen] = []
        self.lock = threading.RLock()
        self.url = ""
        self._ids = itertools.count(1)

    # --- HTTP --------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Canned:
        with self.lock:
            self.requests.append(Seen(method, target, headers, body))
            for index, canned in enumerate(self.script):
                if target.startswith(canned.path_prefix):
                    return self.script.pop(index)
            parts = urlsplit(target)
            path = [unquote(part) for part in parts.path.split("/")[1:]]
            query = parse_qs(parts.query, keep_blank_values=True)
            tenant = self.tokens.get(headers.get("authorization", "").removeprefix("Bearer "))
            if tenant is None or not headers.get("authorization", "").startswith("Bearer "):
                if "plain_401" in self.faults:
                    return Canned(401, {"message": "Unauthorized"})
                return self.error(401, "auth_error", "missing or unknown bearer token")
            try:
                return self.route(method, path, query, tenant, body)
            except Answer as answer:
                return answer.canned

    def route(
        self, method: str, path: list[str], query: dict[str, list[str]], tenant: str, body: bytes
    ) -> Canned:
        match (method, path):
            case ("GET", ["capabilities"]):
                return Canned(200, self.capabilities())
            case ("POST", ["jobs"]):
                return self.submit(tenant, self.json_body(body))
            case ("GET", ["jobs"]):
                return Canned(200, self.list_jobs(tenant, query))
            case ("GET", ["jobs", job_id]):
                return Canned(200, self.document(self.owned(tenant, job_id)))
            case ("POST", ["jobs", job_id, "cancel"]):
                return Canned(200, self.cancel(self.owned(tenant, job_id)))
            case ("GET", ["jobs", job_id, "events"]):
                return Canned(200, self.events(tenant, job_id, query))
            case ("POST", ["jobs", job_id, "events", "ack"]):
                return Canned(200, self.ack(tenant, job_id, self.json_body(body)))
        return self.error(404, "invalid_params", "unknown route", {"reason": "unknown_route"})

    def error(
        self, status: int, code: str, message: str, detail: dict[str, Any] | None = None
    ) -> Canned:
        retryable = RETRYABLE[code] or ("retryable_400" in self.faults and status == 400)
        envelope: dict[str, Any] = {"code": code, "message": message, "retryable": retryable}
        if detail is not None:
            envelope["detail"] = detail
        return Canned(status, {"error": envelope})

    def fail(self, status: int, code: str, message: str, **detail: Any) -> Answer:
        return Answer(self.error(status, code, message, detail or None))

    def json_body(self, body: bytes) -> Any:
        try:
            return json.loads(body or b"{}")
        except ValueError:
            raise self.fail(400, "invalid_params", "request body must be valid JSON") from None

    # --- the protocol ------------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        return {
            "protocol_versions": ["1"],
            "job_types": [
                {
                    "name": "candidate_search",
                    "params_schema": "#/$defs/CandidateSearchParams",
                    "result_schema": "#/$defs/Result_CandidateSearch",
                    "features": ["events", "cancel", "idempotency", "target_selector"],
                    "queued_timeout_ms": 1_800_000,
                    "stall_timeout_ms": 900_000,
                    "heartbeat_interval_ms": 30_000,
                    "default_deadline_ms": 1_800_000,
                }
            ],
            "server_time": now_ms(),
        }

    def submit(self, tenant: str, task: Any) -> Canned:
        if not isinstance(task, dict):
            raise self.fail(400, "invalid_params", "body must be a JSON object")
        if task.get("protocol_version") is None:
            raise self.fail(400, "invalid_params", "protocol_version is required")
        if task["protocol_version"] != "1":
            raise self.fail(
                400,
                "unsupported_protocol_version",
                "unsupported protocol_version",
                received=task["protocol_version"],
                supported=["1"],
            )
        if task.get("job_type") != "candidate_search":
            raise self.fail(
                400, "invalid_params", "unsupported job_type", reason="unsupported_job_type"
            )
        key = task.get("idempotency_key")
        if not isinstance(key, str) or not key.strip():
            raise self.fail(400, "invalid_params", "idempotency_key must be a non-empty string")
        params = task.get("params")
        if not isinstance(params, dict):
            raise self.fail(400, "invalid_params", "params must be a JSON object")
        tags = (params.get("query") or {}).get("tags") if "query" in params else ["x"]
        if not isinstance(tags, list) or not tags or not all(isinstance(t, str) for t in tags):
            raise self.fail(400, "invalid_params", "params.query.tags must be a non-empty array")
        target = params.get("target_id")
        if target is not None and (not isinstance(target, str) or not target.strip()):
            raise self.fail(400, "invalid_params", "params.target_id must be a non-empty string")
        if target is not None and target not in TARGETS:
            raise self.fail(404, "invalid_params", "unknown target", reason="unknown_target")
        if target is None and self.several_targets:
            raise self.fail(
                409, "invalid_params", "several targets: name one", reason="ambiguous_target"
            )
        existing = self.by_key(tenant, key)
        if existing is not None:
            if existing.params != params and "conflict_replays" not in self.faults:
                raise self.fail(
                    409,
                    "idempotency_conflict",
                    "idempotency key was first used with different params",
                    job_id=existing.job_id,
                )
            status = 202 if "replay_202" in self.faults else 200
            return Canned(status, {"job": self.document(existing)})
        created = now_ms()
        no_candidate = any("no-such" in tag for tag in tags)
        job = FakeJob(
            job_id=f"job-{next(self._ids)}-{uuid.uuid4().hex[:8]}",
            tenant=tenant,
            key=key,
            params=params,
            created_at=created,
            updated_at=created,
            run_ms=self.slow_run_ms if target == "slow" else self.run_ms,
            outcome="failed" if no_candidate else "succeeded",
            correlation_id=task.get("correlation_id") or None,
            labels=task.get("labels"),
        )
        self.jobs[job.job_id] = job
        self.record(job, "job.accepted", created)
        return Canned(202, {"job": self.document(job)})

    def by_key(self, tenant: str, key: str) -> FakeJob | None:
        return next(
            (j for j in self.jobs.values() if j.tenant == tenant and j.key == key),
            None,
        )

    def owned(self, tenant: str, job_id: str) -> FakeJob:
        job = self.jobs.get(job_id)
        if job is None and "unknown_job_200" in self.faults:
            raise Answer(Canned(200, {}))
        if job is None or (job.tenant != tenant and "tenant_leak" not in self.faults):
            raise self.fail(404, "invalid_params", "unknown job")
        return self.advance(job)

    def advance(self, job: FakeJob) -> FakeJob:
        """Move the job along the wall clock, recording the events of each step."""
        now = now_ms()
        start = job.created_at + self.queued_ms
        if job.status == "queued" and now >= start:
            job.status, job.started_at, job.updated_at = "running", start, start
            self.record(job, "job.started", start)
        end = start + job.run_ms
        if job.status == "running" and now >= end:
            job.status, job.updated_at = job.outcome, end
            if job.outcome == "succeeded":
                job.result = {"candidates": [], "scanned": 1}
            else:
                job.error = {"code": "no_candidate", "message": "no candidate", "retryable": True}
            self.record(job, f"job.{job.outcome}", end)
        return job

    def record(self, job: FakeJob, kind: str, at: int) -> None:
        if kind in {f"job.{status}" for status in TERMINAL} and "no_terminal_event" in self.faults:
            return
        event: dict[str, Any] = {
            "protocol_version": "1",
            "event_id": f"ev-{len(job.events) + 1}-{uuid.uuid4().hex[:6]}",
            "job_id": job.job_id,
            "type": kind,
            "at": max([at] + [e["at"] for e in job.events]),
            "payload": {},
        }
        if job.correlation_id:
            event["correlation_id"] = job.correlation_id
        if kind.removeprefix("job.") in TERMINAL:
            event["payload"] = {"job": self.document(job)}
            event["payload"]["result" if kind == "job.succeeded" else "error"] = (
                job.result if kind == "job.succeeded" else job.error
            )
        job.events.append(event)

    def document(self, job: FakeJob) -> dict[str, Any]:
        running = job.status == "running"
        now = now_ms()
        created: Any = str(job.created_at) if "string_timestamps" in self.faults else job.created_at
        document: dict[str, Any] = {
            "protocol_version": "1",
            "job_id": job.job_id,
            "job_type": "candidate_search",
            "status": job.status,
            "created_at": created,
            "updated_at": job.updated_at,
            "started_at": job.started_at,
            "heartbeat_at": now if running else None,
            "deadline_at": job.created_at + 1_800_000,
            "lease_active": running,
            "lease_expires_at": now + 60_000 if running else None,
            "attempt": 1 if job.started_at else 0,
            "progress": {"stage": job.status, "at": job.updated_at},
            "idempotency_key": job.key,
            "events_url": f"{self.url}/jobs/{job.job_id}/events",
        }
        if job.correlation_id:
            document["correlation_id"] = job.correlation_id
        if job.labels:
            document["labels"] = job.labels
        if job.status == "succeeded":
            document["result"] = job.result
        elif job.status in TERMINAL:
            document["error"] = job.error
        return document

    def list_jobs(self, tenant: str, query: dict[str, list[str]]) -> dict[str, Any]:
        def one(name: str) -> str | None:
            values = query.get(name)
            return values[-1] if values else None

        limit_text = one("limit") or "100"
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 500:
            raise self.fail(400, "invalid_params", "limit must be 1..500", field="limit")
        cursor = one("cursor") or "c0"
        if not cursor.startswith("c") or not cursor[1:].isdigit():
            raise self.fail(400, "invalid_params", "bad cursor", field="cursor")
        matching = [
            self.advance(job)
            for job in self.jobs.values()
            if job.tenant == tenant
            and one("idempotency_key") in {None, job.key}
            and one("correlation_id") in {None, job.correlation_id}
        ]
        matching = [job for job in matching if one("status") in {None, job.status}]
        start, limit = int(cursor[1:]), int(limit_text)
        page: dict[str, Any] = {
            "jobs": [self.document(job) for job in matching[start : start + limit]],
            "server_time": now_ms(),
        }
        if start + limit < len(matching):
            page["next_cursor"] = f"c{start + limit}"
        return page

    def cancel(self, job: FakeJob) -> dict[str, Any]:
        if job.status not in TERMINAL:
            job.status, job.updated_at = "cancelled", now_ms()
            job.error = {
                "code": "cancelled_by_consumer",
                "message": "cancelled",
                "retryable": False,
            }
            self.record(job, "job.cancelled", job.updated_at)
        return self.document(job)

    def position(self, job: FakeJob, event_id: str | None) -> int | None:
        for index, event in enumerate(job.events):
            if event["event_id"] == event_id:
                return index + 1
        return None

    def events(self, tenant: str, job_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        after = query.get("after")
        if after is not None and (len(after) != 1 or not after[0]):
            raise self.fail(400, "invalid_params", "after must be a non-empty event_id")
        unacked = query.get("unacked", [""])
        if len(unacked) != 1 or unacked[0] not in {"", "0", "1", "true", "false"}:
            raise self.fail(400, "invalid_params", "unacked must be 1 or 0", field="unacked")
        job = self.owned(tenant, job_id)
        if unacked[0] in {"1", "true"}:
            start = job.ack_position
        else:
            start = self.position(job, after[0] if after else None) or 0
        chunk = job.events[start : start + self.page_size]
        page: dict[str, Any] = {
            "job_id": job.job_id,
            "events": chunk,
            "unacked": len(job.events) - job.ack_position,
            "server_time": now_ms(),
        }
        if start + self.page_size < len(job.events):
            page["next_after"] = chunk[-1]["event_id"]
        return page

    def ack(self, tenant: str, job_id: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise self.fail(400, "invalid_params", "request body must be a JSON object")
        through = body.get("ack_through")
        if not isinstance(through, str) or not through:
            raise self.fail(400, "invalid_params", "ack_through is required", field="ack_through")
        job = self.owned(tenant, job_id)
        position = self.position(job, through)
        if position is not None and (position > job.ack_position or "ack_rewinds" in self.faults):
            job.ack_position = position
        return {
            "job_id": job.job_id,
            "acked": job.ack_position,
            "unacked": len(job.events) - job.ack_position,
            "server_time": now_ms(),
        }


class Answer(Exception):  # noqa: N818 - control flow: the answer to give, not a failure
    def __init__(self, canned: Canned) -> None:
        super().__init__(canned.status)
        self.canned = canned


@contextmanager
def fake_producer(**options: Any) -> Iterator[FakeProducer]:
    producer = FakeProducer(**options)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}
            canned = producer.handle(self.command, self.path, headers, body)
            if canned.drop:
                self.close_connection = True
                return
            payload = b"" if canned.body is None else json.dumps(canned.body).encode()
            self.send_response(canned.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in canned.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = answer  # noqa: N815 - BaseHTTPRequestHandler's names

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll interval: shutdown() waits for the loop to notice.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    producer.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield producer
    finally:
        server.shutdown()
        server.server_close()
