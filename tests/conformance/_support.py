"""Black-box helpers: local stacks as subprocesses and a consumer that speaks HTTP like TelePost.

TelePost (consumer-telepost §2.2) sends `Authorization: Bearer <token>` on every request,
`Content-Type: application/json` only with a body, `json.dumps` bodies with its defaults
(non-ASCII escaped) and percent-encodes path segments and query values with nothing safe.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobstream_local.child import ChildStack, start_child
from tests.support.harness import canonical_task as reference_task
from tests.support.stack import environment as stack_environment
from tests.support.validation import validate, validate_error

TOKEN = "local-dev-token"
CALLBACK_TOKEN = "consumer-issued-submit-token"
TERMINAL = frozenset({"succeeded", "failed", "cancelled", "expired"})
STATUSES = frozenset({"queued", "running"}) | TERMINAL
EVENT_TYPES = frozenset(
    {
        "job.accepted",
        "job.started",
        "job.progress",
        "job.succeeded",
        "job.failed",
        "job.expired",
        "job.cancelled",
    }
)
ERROR_CODES = frozenset(
    {
        "no_candidate",
        "source_error",
        "auth_error",
        "quota_exceeded",
        "resource_busy",
        "queued_too_long",
        "stalled_no_progress",
        "deadline_exceeded",
        "cancelled_by_consumer",
        "idempotency_conflict",
        "unsupported_protocol_version",
        "invalid_params",
        "delivery_failed",
        "delivery_rejected",
        "delivery_abandoned",
        "internal_error",
    }
)
LEGACY_JOB_KEYS = (
    "requestId",
    "jobId",
    "state",
    "heartbeatAt",
    "updatedAt",
    "startedAt",
    "createdAt",
    "errorCode",
    "failureCode",
)

REFERENCE_TARGET = "bot1-illust-botefuku"
SLOW_TARGET = "bot1-illust-botefuku-slow"
NOVEL_TARGET = "bot2-novel-marunomi"

# The reference harness: one illustration target (its 20-minute execution ceiling cut to the
# worker's 15-minute Lambda timeout, the longest a deployment accepts).
MAIN_TARGETS: dict[str, Any] = {
    "account": "default",
    "targets": [
        {
            "id": REFERENCE_TARGET,
            "enabled": True,
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["botefuku"]},
            "timeout_ms": 900_000,
        }
    ],
}

# v1.1: four enabled targets over two bots; the first is the reference target made slow
# (a pause per work scanned) so a job stays `running` long enough to observe and cancel it.
MULTI_TARGETS: dict[str, Any] = {
    "account": "default",
    "targets": [
        {
            "id": SLOW_TARGET,
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["botefuku"]},
            "timeout_ms": 900_000,
            "limit": 60,
            "scan_limit": 60,
            "scan_delay_ms": 500,
        },
        {
            "id": "bot1-novel-fantasy",
            "work_type": "novel",
            "source": "catalog",
            "query": {"tags": ["fantasy"]},
        },
        {
            "id": "bot2-illust-landscape",
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["landscape"]},
        },
        {
            "id": NOVEL_TARGET,
            "work_type": "novel",
            "source": "catalog",
            "query": {"tags": ["西瓜肚"]},
        },
    ],
}


def key(prefix: str) -> str:
    """A fresh idempotency key (UUID-shaped like TelePost's request ids, with a readable prefix)."""
    return f"{prefix}-{uuid.uuid4()}"


def canonical_task(idempotency_key: str, callback_url: str | None, **overrides: Any) -> Any:
    """The reference conformance Task with this key, and this callback URL or none."""
    task = reference_task(idempotency_key=idempotency_key, **overrides)
    del task["callback_url"]
    if callback_url is not None:
        task["callback_url"] = callback_url
    return task


def telepost_task(
    idempotency_key: str,
    target_id: str,
    correlation_id: str | None = "chain-135",
    callback_url: str | None = None,
) -> dict[str, Any]:
    """Exactly what TelePost submits (consumer §2.4), in its key order."""
    task: dict[str, Any] = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": idempotency_key,
        "params": {"target_id": target_id},
    }
    if correlation_id:
        task["correlation_id"] = correlation_id
    if callback_url:
        task["callback_url"] = callback_url
    return task


def seg(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def query(**values: str) -> str:
    return "?" + "&".join(f"{name}={seg(value)}" for name, value in values.items())


DEFAULT: Any = object()  # "the client's own token"


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str]


@dataclass
class Client:
    """Speaks HTTP like TelePost; validates every JSON response it gets."""

    base_url: str
    token: str | None = TOKEN

    def raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: Any = DEFAULT,
    ) -> Response:
        data = json.dumps(body).encode("ascii") if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        bearer = self.token if token is DEFAULT else token
        if bearer is not None:
            request.add_header("Authorization", f"Bearer {bearer}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw, status, headers = response.read(), response.status, response.headers
        except urllib.error.HTTPError as error:
            raw, status, headers = error.read(), error.code, error.headers
        assert raw, f"{method} {path} answered {status} with an empty body"
        parsed = json.loads(raw)
        return Response(status, parsed, {k.lower(): v for k, v in headers.items()})

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        schema: str,
        token: Any = DEFAULT,
    ) -> Response:
        """One request; a 2xx body validates as `schema`, any other as the error envelope."""
        response = self.raw(method, path, body, token=token)
        if response.status >= 400:
            validate_error(response.body)
            assert response.body["error"]["code"] in ERROR_CODES
        else:
            validate(response.body, schema)
        return response

    # The operations, as TelePost performs them.

    def capabilities(self) -> dict[str, Any]:
        response = self.call("GET", "/capabilities", schema="Capabilities")
        assert response.status == 200, response.body
        body: dict[str, Any] = response.body
        return body

    def submit(self, task: Any) -> Response:
        response = self.call("POST", "/jobs", task, schema="JobReceipt")
        if response.status in (200, 202):
            validate(response.body["job"], "Job")
        return response

    def admit(self, task: Any) -> dict[str, Any]:
        response = self.submit(task)
        assert response.status == 202, response.body
        job: dict[str, Any] = response.body["job"]
        return job

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.call("GET", f"/jobs/{seg(job_id)}", schema="Job")
        assert response.status == 200, response.body
        body: dict[str, Any] = response.body
        return body

    def jobs(self, **filters: str) -> dict[str, Any]:
        response = self.call(
            "GET", "/jobs" + (query(**filters) if filters else ""), schema="JobPage"
        )
        assert response.status == 200, response.body
        for item in response.body["jobs"]:
            validate(item, "Job")
        body: dict[str, Any] = response.body
        return body

    def events(self, job_id: str, after: str | None = None, unacked: bool = False) -> Any:
        values: dict[str, str] = {}
        if after:
            values["after"] = after
        if unacked:
            values["unacked"] = "1"
        suffix = query(**values) if values else ""
        response = self.call("GET", f"/jobs/{seg(job_id)}/events{suffix}", schema="EventPage")
        assert response.status == 200, response.body
        for event in response.body["events"]:
            validate(event, "Event")
            assert event["job_id"] == job_id
        return response.body

    def ack(self, job_id: str, ack_through: Any) -> Any:
        response = self.call(
            "POST",
            f"/jobs/{seg(job_id)}/events/ack",
            {"ack_through": ack_through},
            schema="AckResult",
        )
        assert response.status == 200, response.body
        assert response.body["job_id"] == job_id
        return response.body

    def cancel(self, job_id: str) -> Response:
        return self.call("POST", f"/jobs/{seg(job_id)}/cancel", schema="Job")

    # Waiting for a job that really runs.

    def wait_for(
        self, job_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        job = self.job(job_id)
        while not done(job):
            assert time.monotonic() < deadline, f"gave up waiting: {job}"
            time.sleep(0.1)
            job = self.job(job_id)
        return job

    def wait_terminal(self, job_id: str, timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(job_id, lambda job: job["status"] in TERMINAL, timeout)

    def wait_running(self, job_id: str, timeout: float = 15) -> dict[str, Any]:
        job = self.wait_for(job_id, lambda job: job["status"] != "queued", timeout)
        assert job["status"] == "running", job
        return job

    def settled_events(self, job_id: str, timeout: float = 10) -> Any:
        """The events page once the terminal event is in it."""
        deadline = time.monotonic() + timeout
        while True:
            page = self.events(job_id)
            kinds = [event["type"] for event in page["events"]]
            if kinds and kinds[-1] in {f"job.{status}" for status in TERMINAL}:
                return page
            assert time.monotonic() < deadline, kinds
            time.sleep(0.1)


def same_event(pushed: Any, pulled: Any) -> None:
    """A pushed Event equals the pulled one; only `payload.job.events_url` may differ, relative in
    the callback (no request host at delivery) and absolute on the pull side (docs/protocol.md)."""
    pushed, pulled = json.loads(json.dumps(pushed)), json.loads(json.dumps(pulled))
    pushed_job, pulled_job = pushed["payload"].get("job"), pulled["payload"].get("job")
    if pushed_job is not None and pulled_job is not None:
        pushed_url, pulled_url = pushed_job.pop("events_url", ""), pulled_job.pop("events_url", "")
        assert pulled_url.endswith(pushed_url), (pushed_url, pulled_url)
    assert pushed == pulled


def types(page: Any) -> list[str]:
    return [event["type"] for event in page["events"]]


def now_ms() -> int:
    return int(time.time() * 1000)


# The stack as a subprocess.


@dataclass
class Stack:
    child: ChildStack
    targets_path: Path

    @property
    def client(self) -> Client:
        return Client(self.child.url)

    def write_targets(self, targets: Any) -> None:
        """Replace the live targets file; a new mtime makes the stack re-read it."""
        text = targets if isinstance(targets, str) else json.dumps(targets)
        self.targets_path.write_text(text, encoding="utf-8")
        stamp = time.time() + 10 + time.monotonic() % 1000
        os.utime(self.targets_path, (stamp, stamp))

    def stop(self) -> None:
        self.child.stop()


def start_stack(directory: Path, targets: Any, **env: str) -> Stack:
    targets_path = directory / "targets.json"
    targets_path.write_text(json.dumps(targets), encoding="utf-8")
    child = start_child(stack_environment(JOBSTREAM_TARGETS=str(targets_path), **env))
    return Stack(child, targets_path)


def wait_until(condition: Callable[[], bool], timeout: float = 10, message: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message or "condition not met in time"
        time.sleep(0.05)
