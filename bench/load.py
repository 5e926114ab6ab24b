"""`python -m bench.load [--jobs N] [--consumers C]`: a bounded load test of the local stack.

Starts `python -m jobstream_local` (JOBSTREAM_LOCAL_CONCURRENCY=8, a free port) and a callback
receiver, both on 127.0.0.1. C consumer threads submit N jobs (each its own idempotency key, each
with the receiver as callback_url); then it waits, bounded, until every job's terminal callback
has arrived, and checks:

- every job is terminal (GET /jobs/{job_id}) and GET /jobs lists all N;
- every event of every job's events pages (following next_after) reached the receiver; an event
  delivered more than once (by event_id) is allowed by the protocol and counted; a missing one is
  a violation;
- no callback is dead-lettered (no dead intent, nothing in the callback DLQ);
- no answer was a 5xx, neither to us nor in the stack's request log.

Numbers go to stdout and to docs/load.md; the exit status is 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import queue
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.receiver import serve_callbacks
from jobstream_local import local_env
from jobstream_local.child import child_environment, start_child

REPOSITORY = Path(__file__).resolve().parent.parent
REPORT = REPOSITORY / "docs" / "load.md"
TOKEN = "local-dev-token"  # noqa: S105 - the local stack's documented default
TERMINAL_TYPES = frozenset({"job.succeeded", "job.failed", "job.expired", "job.cancelled"})
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})
PROGRESS_EVERY_S = 5.0
# After the last terminal callback: how long earlier events may still be on their way.
STRAGGLER_GRACE_S = 60.0
REQUEST_TIMEOUT_S = 60.0


def _log(message: str) -> None:
    print(f"[load {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


# --- what the receiver saw ---------------------------------------------------------------------


@dataclass
class Received:
    """Every callback POST, by event_id, and when each job's first terminal callback arrived."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    posts: int = 0
    by_event: Counter[str] = field(default_factory=Counter)
    by_job: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    terminal_at: dict[str, float] = field(default_factory=dict)
    malformed: int = 0

    def record(self, body: bytes) -> None:
        now = time.monotonic()
        try:
            event = json.loads(body)
            event_id, job_id, kind = str(event["event_id"]), str(event["job_id"]), event["type"]
        except (ValueError, KeyError, TypeError):
            with self.lock:
                self.posts += 1
                self.malformed += 1
            return
        with self.lock:
            self.posts += 1
            self.by_event[event_id] += 1
            self.by_job[job_id].add(event_id)
            if kind in TERMINAL_TYPES:
                self.terminal_at.setdefault(job_id, now)

    def terminal_count(self) -> int:
        with self.lock:
            return len(self.terminal_at)


def callback_receiver(received: Received) -> AbstractContextManager[str]:
    def answer(body: bytes) -> int:
        received.record(body)
        return 204

    return serve_callbacks(answer)


# --- the stack ---------------------------------------------------------------------------------


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    log: list[str]


@contextmanager
def local_stack() -> Iterator[Stack]:
    # A local-env directory of its own: never the developer's stacks' (local_env.py).
    folder = Path(tempfile.mkdtemp(prefix="jobstream-load-"))
    child = start_child(
        child_environment(JOBSTREAM_LOCAL_CONCURRENCY="8", JOBSTREAM_LOCAL_ENV_DIR=str(folder))
    )
    try:
        yield Stack(url=child.url, env=_stack_env(folder, child.url), log=child.stderr)
    finally:
        child.stop()


def _stack_env(folder: Path, url: str) -> dict[str, str]:
    """Our stack's environment (tables, queues, AWS endpoint), from the file it wrote on start."""
    path = local_env.file_for(folder, int(url.rsplit(":", 1)[1]))
    values = local_env.read(path)
    if values is None:
        raise RuntimeError(f"{path.name}: the stack at {url} wrote no local-env file")
    return values


# --- HTTP calls, timed -------------------------------------------------------------------------


@dataclass
class Calls:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    server_errors: list[str] = field(default_factory=list)
    transport_errors: list[str] = field(default_factory=list)


class Api:
    def __init__(self, base_url: str, calls: Calls, token: str = TOKEN) -> None:
        self.base_url = base_url
        self.calls = calls
        self.token = token

    def call(self, kind: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request; its latency and status are recorded under `kind`. Status 0: no answer."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        started = time.perf_counter()
        status, payload = 0, None
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        except OSError as error:
            with self.calls.lock:
                self.calls.transport_errors.append(f"{method} {path}: {error}")
        elapsed = time.perf_counter() - started
        with self.calls.lock:
            self.calls.latencies[kind].append(elapsed)
            self.calls.statuses[kind][status] += 1
            if status >= 500:
                self.calls.server_errors.append(f"{status} {method} {path}: {payload!r}"[:500])
        if payload is None:
            return status, None
        try:
            return status, json.loads(payload)
        except ValueError:
            return status, None


def run_parallel(label: str, items: list[str], workers: int, work: Callable[[str], None]) -> None:
    """`work(item)` for every item on `workers` threads, with a progress line now and then."""
    pending: queue.SimpleQueue[str] = queue.SimpleQueue()
    for item in items:
        pending.put(item)
    lock = threading.Lock()
    done = 0

    def drain() -> None:
        nonlocal done
        while True:
            try:
                item = pending.get_nowait()
            except queue.Empty:
                return
            work(item)
            with lock:
                done += 1

    threads = [threading.Thread(target=drain, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=PROGRESS_EVERY_S)
            if thread.is_alive():
                _log(f"{label}: {done}/{len(items)}")


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    jobs: int
    consumers: int
    submit_s: float = 0.0
    # The machine's 1-minute load average as the run started and as it ended: the numbers
    # below mean little without it on a shared 2-core machine.
    load_before: float = 0.0
    load_after: float = 0.0
    total_s: float = 0.0
    submitted: dict[str, str] = field(default_factory=dict)  # key -> job_id
    submitted_at: dict[str, float] = field(default_factory=dict)  # job_id -> monotonic
    submit_failures: list[str] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    events_total: int = 0
    events_missing: list[str] = field(default_factory=list)
    not_terminal: list[str] = field(default_factory=list)
    listed: int = 0
    ack_failures: list[str] = field(default_factory=list)
    dead_intents: int = -1
    dlq_messages: int = -1
    stack_5xx: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def submit_all(api: Api, callback_url: str, outcome: Outcome) -> None:
    lock = threading.Lock()

    def submit(key: str) -> None:
        task = {
            "protocol_version": "1",
            "job_type": "candidate_search",
            "idempotency_key": key,
            "correlation_id": "bench-load",
            "callback_url": callback_url,
            "params": {"target_id": "demo-illustration"},
        }
        started = time.monotonic()
        status, body = api.call("POST /jobs", "POST", "/jobs", task)
        with lock:
            if status == 202 and isinstance(body, dict):
                job_id = str(body["job"]["job_id"])
                outcome.submitted[key] = job_id
                outcome.submitted_at[job_id] = started
            else:
                outcome.submit_failures.append(f"{key}: {status} {body!r}"[:300])

    keys = [f"load-{index:06d}" for index in range(outcome.jobs)]
    run_parallel("submitting", keys, outcome.consumers, submit)


def wait_for_terminal(received: Received, outcome: Outcome, timeout_s: float) -> bool:
    """Until every submitted job's terminal callback arrived (True) or the time is up."""
    expected = set(outcome.submitted.values())
    deadline = time.monotonic() + timeout_s
    last = 0.0
    while True:
        with received.lock:
            arrived = len(expected & received.terminal_at.keys())
            posts = received.posts
        if arrived == len(expected):
            return True
        now = time.monotonic()
        if now >= deadline:
            return False
        if now - last >= PROGRESS_EVERY_S:
            _log(
                f"waiting: {arrived}/{len(expected)} jobs terminal by callback, "
                f"{posts} callbacks received, {deadline - now:.0f} s left"
            )
            last = now
        time.sleep(0.2)


def read_events(api: Api, job_id: str) -> list[str] | None:
    """Every event_id of the job, following next_after; None when a page could not be read."""
    event_ids: list[str] = []
    after = ""
    while True:
        path = f"/jobs/{job_id}/events" + (f"?after={after}" if after else "")
        status, page = api.call("GET /jobs/{job_id}/events", "GET", path)
        if status != 200 or not isinstance(page, dict):
            return None
        event_ids += [str(event["event_id"]) for event in page["events"]]
        after = str(page.get("next_after") or "")
        if not after:
            return event_ids


def verify_jobs(api: Api, received: Received, outcome: Outcome) -> None:
    lock = threading.Lock()
    expected_events: dict[str, list[str]] = {}

    def check(job_id: str) -> None:
        status, job = api.call("GET /jobs/{job_id}", "GET", f"/jobs/{job_id}")
        job_status = str(job.get("status")) if status == 200 and isinstance(job, dict) else "?"
        event_ids = read_events(api, job_id)
        with lock:
            outcome.statuses[job_status] += 1
            if job_status not in TERMINAL_STATUSES:
                outcome.not_terminal.append(f"{job_id}: {status} {job_status}")
            if event_ids is None:
                outcome.events_missing.append(f"{job_id}: events page unreadable")
            else:
                expected_events[job_id] = event_ids

    job_ids = sorted(outcome.submitted.values())
    run_parallel("reading jobs and events", job_ids, outcome.consumers, check)
    outcome.events_total = sum(len(ids) for ids in expected_events.values())

    def missing() -> list[str]:
        with received.lock:
            return [
                f"{job_id}: {event_id}"
                for job_id, ids in expected_events.items()
                for event_id in ids
                if received.by_event[event_id] == 0
            ]

    # An event recorded before the terminal one may still be on its way (retries, reordering).
    deadline = time.monotonic() + STRAGGLER_GRACE_S
    gaps = missing()
    while gaps and time.monotonic() < deadline:
        _log(f"verifying: {len(gaps)} events not received yet; waiting for stragglers")
        time.sleep(2)
        gaps = missing()
    outcome.events_missing += gaps

    def acknowledge(job_id: str) -> None:
        ids = expected_events.get(job_id)
        if not ids:
            return
        status, result = api.call(
            "POST /jobs/{job_id}/events/ack",
            "POST",
            f"/jobs/{job_id}/events/ack",
            {"ack_through": ids[-1]},
        )
        if status != 200 or not isinstance(result, dict) or result.get("unacked") != 0:
            with lock:
                outcome.ack_failures.append(f"{job_id}: {status} {result!r}"[:300])

    run_parallel("acknowledging", job_ids, outcome.consumers, acknowledge)

    cursor = ""
    while True:
        path = "/jobs?correlation_id=bench-load&limit=500" + (f"&cursor={cursor}" if cursor else "")
        status, page = api.call("GET /jobs", "GET", path)
        if status != 200 or not isinstance(page, dict):
            outcome.violations.append(f"GET /jobs answered {status}")
            break
        outcome.listed += len(page["jobs"])
        cursor = str(page.get("next_cursor") or "")
        if not cursor:
            break


def check_dead_letters(stack: Stack, outcome: Outcome) -> None:
    """What `jobstream --local dlq list` reports, plus the callback DLQ's own message count."""
    os.environ.update(stack.env)
    import boto3

    from jobstream.runtime import runtime
    from jobstream.service.dead_letters import list_dead

    rt = runtime()
    dlq_url = rt.settings.callback_dead_letter_url
    if not dlq_url:
        raise RuntimeError("the stack has no callback dead-letter queue configured")
    outcome.dead_intents = len(list_dead(rt))
    sqs = boto3.client("sqs", endpoint_url=stack.env["AWS_ENDPOINT_URL"])
    attributes = sqs.get_queue_attributes(
        QueueUrl=dlq_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    outcome.dlq_messages = int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
        attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
    )


def stack_server_errors(log: list[str]) -> list[str]:
    """Requests the stack's gateway logged with a 5xx status (`METHOD PATH -> STATUS`)."""
    found = []
    for line in list(log):
        _, arrow, status = line.rstrip().rpartition(" -> ")
        if arrow and status.isdigit() and int(status) >= 500:
            found.append(line.strip())
    return found


def run(jobs: int, consumers: int, timeout_s: float) -> tuple[Outcome, Calls, Received]:
    outcome = Outcome(jobs=jobs, consumers=consumers)
    calls = Calls()
    received = Received()
    with callback_receiver(received) as callback_url, local_stack() as stack:
        _log(f"stack ready at {stack.url}; {jobs} jobs, {consumers} consumers")
        api = Api(stack.url, calls)
        outcome.load_before = os.getloadavg()[0]
        started = time.monotonic()
        submit_all(api, callback_url, outcome)
        outcome.submit_s = time.monotonic() - started
        _log(f"submitted {len(outcome.submitted)} jobs in {outcome.submit_s:.1f} s")
        if not wait_for_terminal(received, outcome, timeout_s):
            outcome.violations.append(f"not every job was terminal by callback after {timeout_s} s")
        outcome.total_s = time.monotonic() - started
        outcome.load_after = os.getloadavg()[0]
        _log(f"{received.terminal_count()} jobs terminal after {outcome.total_s:.1f} s; verifying")
        verify_jobs(api, received, outcome)
        check_dead_letters(stack, outcome)
        outcome.stack_5xx = stack_server_errors(stack.log)
    judge(outcome, calls, received)
    return outcome, calls, received


def judge(outcome: Outcome, calls: Calls, received: Received) -> None:
    v = outcome.violations
    if outcome.submit_failures:
        v.append(f"{len(outcome.submit_failures)} submissions not admitted (202)")
    if outcome.not_terminal:
        v.append(f"{len(outcome.not_terminal)} jobs not terminal")
    if outcome.events_missing:
        v.append(f"{len(outcome.events_missing)} events never received by callback")
    if outcome.listed != len(outcome.submitted):
        v.append(f"GET /jobs listed {outcome.listed} jobs, {len(outcome.submitted)} submitted")
    if outcome.ack_failures:
        v.append(f"{len(outcome.ack_failures)} acks failed or left events unacked")
    if outcome.dead_intents != 0:
        v.append(f"{outcome.dead_intents} dead-lettered callback intents")
    if outcome.dlq_messages != 0:
        v.append(f"{outcome.dlq_messages} messages in the callback DLQ")
    if calls.server_errors:
        v.append(f"{len(calls.server_errors)} 5xx answers to the load test")
    if outcome.stack_5xx:
        v.append(f"{len(outcome.stack_5xx)} 5xx answers in the stack's request log")
    if calls.transport_errors:
        v.append(f"{len(calls.transport_errors)} requests without an answer")
    if received.malformed:
        v.append(f"{received.malformed} malformed callback bodies")


# --- the report --------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def report(outcome: Outcome, calls: Calls, received: Received, timeout_s: float) -> str:
    terminal_latencies = [
        received.terminal_at[job_id] - submitted
        for job_id, submitted in outcome.submitted_at.items()
        if job_id in received.terminal_at
    ]
    duplicates = sum(count - 1 for count in received.by_event.values() if count > 1)
    duplicated_events = sum(1 for count in received.by_event.values() if count > 1)
    completed = len(terminal_latencies)
    throughput = completed / outcome.total_s if outcome.total_s else 0.0
    submit_rate = len(outcome.submitted) / outcome.submit_s if outcome.submit_s else 0.0
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(outcome.statuses.items()))
    rows = [
        ("result", "PASS" if not outcome.violations else "FAIL"),
        ("jobs / consumers", f"{outcome.jobs} / {outcome.consumers}"),
        ("machine", f"{os.cpu_count()} CPUs, Python {platform.python_version()}"),
        (
            "load average (1 min) at the start / end",
            f"{outcome.load_before:.1f} / {outcome.load_after:.1f}",
        ),
        ("submitting took", f"{outcome.submit_s:.1f} s"),
        ("first submit to last terminal callback", f"{outcome.total_s:.1f} s"),
        ("throughput (terminal jobs / s)", f"{throughput:.1f}"),
        ("submit rate (jobs / s)", f"{submit_rate:.1f}"),
        ("jobs admitted (202)", str(len(outcome.submitted))),
        ("jobs by final status", by_status),
        ("events on the jobs' pages", str(outcome.events_total)),
        ("callbacks received (POSTs)", str(received.posts)),
        ("distinct events received", str(len(received.by_event))),
        ("events never received", str(len(outcome.events_missing))),
        (
            "duplicate deliveries (extra POSTs of an event_id)",
            f"{duplicates} (over {duplicated_events} events)",
        ),
        (
            "dead-lettered intents / callback DLQ messages",
            f"{outcome.dead_intents} / {outcome.dlq_messages}",
        ),
        (
            "5xx answers (to us / in the stack log)",
            f"{len(calls.server_errors)} / {len(outcome.stack_5xx)}",
        ),
        ("requests without an answer", str(len(calls.transport_errors))),
    ]
    lines = [
        "# Load test",
        "",
        "Written by `python -m bench.load`; overwritten on every run. Numbers from the last run.",
        "",
        "Reproduce (from the repository root, after `make setup`):",
        "",
        "```sh",
        f".venv/bin/python -m bench.load --jobs {outcome.jobs} --consumers {outcome.consumers}",
        "```",
        "",
        "One local stack (`python -m jobstream_local`, `JOBSTREAM_LOCAL_CONCURRENCY=8`, moto in",
        "a process of its own, see docs/operations.md: the API, the pollers and the functions",
        "share one interpreter, moto has the other) and one callback receiver answering 204,",
        "all on 127.0.0.1. Each consumer",
        "thread submits jobs (`demo-illustration`, its own idempotency key, a `callback_url`)",
        "back to back; the run then waits until every job's terminal callback has arrived",
        f"(at most {timeout_s:.0f} s).",
        "",
        "## Run",
        "",
        "| | |",
        "|---|---|",
        *(f"| {label} | {value} |" for label, value in rows),
        "",
        "## Latency (ms)",
        "",
        "| | count | p50 | p90 | p99 | max |",
        "|---|---:|---:|---:|---:|---:|",
        _row("submit → terminal callback", terminal_latencies),
    ]
    lines += [_row(kind, values) for kind, values in sorted(calls.latencies.items())]
    lines += [
        "",
        "## HTTP statuses",
        "",
        "| call | statuses |",
        "|---|---|",
    ]
    lines += [
        f"| {kind} | {', '.join(f'{s}: {n}' for s, n in sorted(counts.items()))} |"
        for kind, counts in sorted(calls.statuses.items())
    ]
    lines += ["", "## Violations", ""]
    lines += [f"- {item}" for item in outcome.violations] or ["none"]
    return "\n".join(lines) + "\n"


def _row(label: str, values: list[float]) -> str:
    return (
        f"| {label} | {len(values)} | {_ms(percentile(values, 0.5))} | "
        f"{_ms(percentile(values, 0.9))} | {_ms(percentile(values, 0.99))} | "
        f"{_ms(max(values, default=0.0))} |"
    )


def _details(outcome: Outcome, calls: Calls) -> None:
    for title, items in (
        ("submissions not admitted", outcome.submit_failures),
        ("jobs not terminal", outcome.not_terminal),
        ("events never received", outcome.events_missing),
        ("acks", outcome.ack_failures),
        ("5xx answers", calls.server_errors),
        ("5xx in the stack log", outcome.stack_5xx),
        ("no answer", calls.transport_errors),
    ):
        if items:
            _log(f"{title} ({len(items)}), first ones:")
            for item in items[:10]:
                _log(f"  {item}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs to submit (2000)")
    parser.add_argument("--consumers", type=int, default=8, help="submitting threads (8)")
    parser.add_argument(
        "--timeout", type=float, default=1200, help="seconds to wait for every job (1200)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.consumers < 1 or args.timeout <= 0:
        parser.error("--jobs, --consumers and --timeout must be positive")
    outcome, calls, received = run(args.jobs, args.consumers, args.timeout)
    text = report(outcome, calls, received, args.timeout)
    REPORT.write_text(text, encoding="utf-8")
    print(text)
    _details(outcome, calls)
    if outcome.violations:
        _log("FAIL: " + "; ".join(outcome.violations))
        return 1
    _log(f"PASS; report in {REPORT.relative_to(REPOSITORY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
