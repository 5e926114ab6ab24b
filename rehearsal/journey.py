"""The end-to-end check through the emulated API Gateway, work queue, callback queue and
schedule: one consumer's journey, each step failing fast with the functions' own log lines."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jobstream_client.webhooks import CallbackVerificationError, verify_callback
from jobstream_conformance.callbacks import ACCEPT, Receiver
from rehearsal.api import Answer, ApiClient
from rehearsal.logs import FunctionLogs
from rehearsal.plan import Credentials
from rehearsal.stack import Stack
from rehearsal.toolchain import RehearsalError

T = TypeVar("T")
JOB_TIMEOUT_S = 90.0
CALLBACK_TIMEOUT_S = 90.0
POLL_S = 0.5
LOG_CHECK_EVERY_S = 2.0
TERMINAL = frozenset({"succeeded", "failed", "cancelled", "expired"})
# The sample Task: the catalog target every deployment ships in its layer.
TARGET_ID = "demo-illustration"


@dataclass
class Journey:
    api: ApiClient  # tenant A
    stack: Stack
    credentials: Credentials
    receiver: Receiver
    logs: FunctionLogs
    scheduled: list[str]  # logical ids of the functions a schedule invokes
    refusals: Callable[[], list[str]]  # what the emulator's shims refused (log lines)
    deployed_at: float  # time.monotonic() when the stack was complete
    sweep_timeout_s: float
    say: Callable[[str], None] = print
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))

    # -- helpers ---------------------------------------------------------------------------

    def _fail(self, step: str, message: str) -> RehearsalError:
        failures = self.logs.failures()
        if failures:
            message += "\nfunction logs:\n" + "\n".join(f"  {f.short()}" for f in failures[:10])
        refusals = self.refusals()
        if refusals:
            message += "\nrefused by the emulator:\n" + "\n".join(f"  {r}" for r in refusals[:10])
        return RehearsalError(step, message)

    def _expect(self, step: str, answer: Answer, status: int) -> Any:
        if answer.status != status:
            raise self._fail(
                step, f"expected HTTP {status}, got {answer.status}: {answer.text[:500]}"
            )
        return answer.body

    def _wait(self, step: str, probe: Callable[[], T | None], timeout_s: float, what: str) -> T:
        """Poll `probe` until it returns a value; any failure in the logs ends the wait early."""
        deadline = time.monotonic() + timeout_s
        next_log_check = time.monotonic() + LOG_CHECK_EVERY_S
        while True:
            value = probe()
            if value is not None:
                return value
            now = time.monotonic()
            if now >= deadline:
                raise self._fail(step, f"{what} did not happen within {timeout_s:.0f} s")
            if now >= next_log_check:
                if self.logs.failures() or self.refusals():
                    raise self._fail(step, f"{what} had not happened, and something failed")
                next_log_check = now + LOG_CHECK_EVERY_S
            time.sleep(POLL_S)

    def _task(self, name: str, callback: bool) -> dict[str, Any]:
        task: dict[str, Any] = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": f"rehearsal-{self.run_id}-{name}",
            "correlation_id": f"rehearsal:{self.run_id}",
            "params": {"target_id": TARGET_ID},
        }
        if callback:
            task["callback_url"] = self.receiver.url + ACCEPT
        return task

    def _events(self, step: str, job_id: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        query: dict[str, str] = {}
        while True:
            page = self._expect(step, self.api.call("GET", f"/jobs/{job_id}/events", **query), 200)
            events += page["events"]
            if not page.get("next_after"):
                return events
            query = {"after": page["next_after"]}

    # -- steps -----------------------------------------------------------------------------

    def capabilities(self) -> None:
        step = "GET /capabilities"
        body = self._expect(step, self.api.call("GET", "/capabilities"), 200)
        if "1" not in body.get("protocol_versions", []):
            raise self._fail(step, f"protocol version 1 not offered: {body}")
        refused = self.api.with_token(None).call("GET", "/capabilities")
        if refused.status != 401:
            raise self._fail(step, f"no token: expected 401, got {refused.status}")
        self.say("ok   GET /capabilities (200 with the tenant's token, 401 without)")

    def console(self) -> None:
        step = "GET /console/"
        anonymous = self.api.with_token(None)
        page = anonymous.call("GET", "/console")  # 301 to console/, followed
        self._expect(step, page, 200)
        policy = page.headers.get("content-security-policy", "")
        if (
            '<script type="module" src="js/app.js">' not in page.text
            or "script-src 'self'" not in policy
        ):
            raise self._fail(step, f"not the console's page under its CSP: {page.headers}")
        script = anonymous.call("GET", "/console/js/app.js")
        self._expect("GET /console/js/app.js", script, 200)
        if not script.headers.get("content-type", "").startswith("text/javascript"):
            raise self._fail(step, f"app.js answered as {script.headers.get('content-type')}")
        self.say("ok   GET /console/ (the console's page and modules, no token, under the CSP)")

    def submit_and_run(self) -> str:
        step = "submit, worker runs it"
        task = self._task("run", callback=True)
        job = self._expect(step, self.api.call("POST", "/jobs", task), 202)["job"]
        replay = self._expect(step, self.api.call("POST", "/jobs", task), 200)["job"]
        if replay["job_id"] != job["job_id"]:
            raise self._fail(step, f"a replay answered another job: {replay['job_id']}")

        def finished() -> dict[str, Any] | None:
            current = self._expect(step, self.api.call("GET", f"/jobs/{job['job_id']}"), 200)
            found: dict[str, Any] = current.get("job", current)
            return found if found["status"] in TERMINAL else None

        events_url = str(job.get("events_url", ""))
        if not events_url.startswith(f"{self.api.base_url}/"):
            raise self._fail(step, f"events_url {events_url!r} is not under {self.api.base_url}")
        done = self._wait(step, finished, JOB_TIMEOUT_S, f"job {job['job_id']} finishing")
        if done["status"] != "succeeded":
            raise self._fail(step, f"job ended {done['status']}: {json.dumps(done)[:500]}")
        page = self._expect(step, self.api.call("GET", events_url), 200)
        if page.get("job_id") != job["job_id"]:
            raise self._fail(step, f"following events_url answered {page}")
        self.say(
            f"ok   POST /jobs 202, replay 200; the worker ran {job['job_id']} to succeeded; "
            "its events_url answers"
        )
        return str(job["job_id"])

    def page_and_ack(self, job_id: str) -> None:
        step = "page and ack events"
        events = self._events(step, job_id)
        types = [event["type"] for event in events]
        for wanted in ("job.accepted", "job.started", "job.succeeded"):
            if wanted not in types:
                raise self._fail(step, f"no {wanted} in the stream: {types}")
        last = events[-1]["event_id"]
        acked = self._expect(
            step, self.api.call("POST", f"/jobs/{job_id}/events/ack", {"ack_through": last}), 200
        )
        if acked.get("unacked") != 0:
            raise self._fail(step, f"after acking the last event: {acked}")
        page = self._expect(step, self.api.call("GET", f"/jobs/{job_id}/events", unacked="1"), 200)
        if page["events"]:
            raise self._fail(step, f"unacked=1 still lists {len(page['events'])} events")
        other = self.api.with_token(self.credentials.token_b).call("GET", f"/jobs/{job_id}")
        if other.status != 404:
            raise self._fail(step, f"another tenant read the job: HTTP {other.status}")
        self.say(f"ok   paged {len(events)} events ({', '.join(types)}), acked them all; "
                 "the other tenant gets 404")  # fmt: skip

    def feed(self, job_id: str) -> None:
        """The tenant's feed (extension): the job's events once each, in order, under a named
        cursor that resumes after its ack; the other tenant cannot use the cursor."""
        step = "the tenant's feed"
        stream = [event["event_id"] for event in self._events(step, job_id)]
        time.sleep(1)  # the feed shows an event once it has settled (FeedSettleMs)
        shown: list[str] = []
        query = {"consumer": "rehearsal", "limit": "200"}
        while True:
            page = self._expect(step, self.api.call("GET", "/events", **query), 200)
            shown += [e["event_id"] for e in page["events"] if e["job_id"] == job_id]
            query = {"after": page["next_after"], "limit": "200"}
            if not page["has_more"]:
                break
        if shown != stream:
            raise self._fail(step, f"the feed shows {shown}, the job's stream {stream}")
        body = {"consumer": "rehearsal", "through": page["next_after"]}
        self._expect(step, self.api.call("POST", "/events/ack", body), 200)
        resumed = self._expect(step, self.api.call("GET", "/events", consumer="rehearsal"), 200)
        if any(e["job_id"] == job_id for e in resumed["events"]):
            raise self._fail(step, "the named cursor did not resume after its ack")
        other = self.api.with_token(self.credentials.token_b)
        refused = other.call("GET", "/events", after=page["next_after"])
        if refused.status != 400:
            raise self._fail(step, f"the other tenant used the cursor: HTTP {refused.status}")
        self.say(f"ok   the feed showed the job's {len(stream)} events once, in order; its named "
                 "cursor resumed after the ack; the other tenant's use of it is a 400")  # fmt: skip

    def cancel(self) -> str:
        """Cancel a job while it is queued, then let the worker receive its message: the job
        must stay cancelled. The queue triggers are paused meanwhile, as an operator can pause
        them: a job of the sample target runs in milliseconds, before any cancel could land."""
        step = "cancel a second job"
        with self.stack.queue_triggers_paused():
            task = self._task("cancel", callback=False)
            job_id = str(
                self._expect(step, self.api.call("POST", "/jobs", task), 202)["job"]["job_id"]
            )
            cancelled = self._expect(step, self.api.call("POST", f"/jobs/{job_id}/cancel"), 200)
            status = (cancelled.get("job") or cancelled)["status"]
            if status != "cancelled":
                raise self._fail(step, f"a queued job's cancel answered status {status}")
        self._wait(step, lambda: True if self.stack.queues_drained() else None,
                   JOB_TIMEOUT_S, "the worker receiving the cancelled job's message")  # fmt: skip
        job = self._expect(step, self.api.call("GET", f"/jobs/{job_id}"), 200)
        if (job.get("job") or job)["status"] != "cancelled":
            raise self._fail(step, f"the worker changed a cancelled job: {job}")
        types = [event["type"] for event in self._events(step, job_id)]
        if types[-1:] != ["job.cancelled"] or "job.started" in types:
            raise self._fail(step, f"the cancelled job's stream: {types}")
        self.say(f"ok   POST /jobs/{job_id}/cancel 200 while queued; after the worker got its "
                 f"message it is still cancelled ({', '.join(types)})")  # fmt: skip
        return job_id

    def callbacks(self, job_id: str) -> None:
        step = "callbacks delivered"
        expected = {event["event_id"] for event in self._events(step, job_id)}

        def all_delivered() -> list[Any] | None:
            seen = {}
            for delivery in self.receiver.received(ACCEPT):
                event = json.loads(delivery.body)
                if event.get("job_id") == job_id:
                    seen[event["event_id"]] = delivery
            return list(seen.values()) if expected <= set(seen) else None

        deliveries = self._wait(step, all_delivered, CALLBACK_TIMEOUT_S, "every callback")
        for delivery in deliveries:
            # As a consumer checks it: the bearer token and the Standard Webhooks signature.
            try:
                verify_callback(
                    delivery.headers,
                    delivery.body,
                    self.credentials.signing_secret,
                    token=self.credentials.callback_token,
                )
            except CallbackVerificationError as error:
                raise self._fail(step, f"a callback does not verify: {error}") from None

        def recorded() -> list[Any] | None:
            # The producer records each delivery after the receiver's answer: a moment later.
            view = self._expect(step, self.api.call("GET", f"/jobs/{job_id}/callbacks"), 200)
            states = [callback["state"] for callback in view["callbacks"]]
            return states if states and set(states) == {"delivered"} else None

        states = self._wait(step, recorded, CALLBACK_TIMEOUT_S, "every delivery recorded")
        self.say(
            f"ok   {len(deliveries)} callbacks reached the receiver, bearer and signature valid; "
            f"GET /jobs/{{id}}/callbacks shows {len(states)} delivered"
        )

    def sweep(self) -> None:
        step = "scheduled sweep"
        if not self.scheduled:
            raise self._fail(step, "the template schedules no function")
        remaining = self.deployed_at + self.sweep_timeout_s - time.monotonic()

        def ran() -> list[str] | None:
            reports = [
                logical for logical in self.scheduled
                if self.logs.containing(logical, "REPORT RequestId")
            ]  # fmt: skip
            return reports if len(reports) == len(self.scheduled) else None

        self._wait(step, ran, max(remaining, 1.0), f"a scheduled run of {self.scheduled}")
        finished = [
            line
            for logical in self.scheduled
            for line in self.logs.containing(logical, "sweep finished")
        ]
        # A sweep that found nothing to do logs its counts at DEBUG only.
        counts = json.loads(finished[-1]).get("sweep") if finished else "idle, nothing to repair"
        self.say(f"ok   the schedule invoked {', '.join(self.scheduled)} (sweep: {counts})")

    def run(self) -> None:
        self.capabilities()
        self.console()
        job_id = self.submit_and_run()
        self.page_and_ack(job_id)
        self.feed(job_id)
        self.cancel()
        self.callbacks(job_id)
        self.sweep()
