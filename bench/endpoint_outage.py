"""`python -m bench.endpoint_outage`: one tenant's receiver down never slows another's callbacks.

Starts a local stack with two tenants, `alpha` and `bravo`, each with a callback receiver of its
own on 127.0.0.1, retries from 5 s and a probe every 5 s. Both submit jobs at the same
pace through three phases: both receivers healthy; `bravo`'s answering 503 (its endpoint is
paused once the rule holds: 5 failures in a row over 30 s); `bravo`'s healthy again. Measured:
`alpha`'s callback latency (submission to its job's first callback) while `bravo` is healthy and
while it is down, the POSTs `bravo`'s receiver sees while paused (probes only), that every
`bravo` callback arrives exactly once after the recovery and none is dead-lettered, and the
callback queue's in-flight count throughout.

Prints the figures and writes them as the "One tenant's receiver down" section of docs/load.md
(after `python -m bench.load` and `python -m bench.fairness`); exit status 1 when a criterion
failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fairness import write_section
from bench.load import REPORT, REPOSITORY, TERMINAL_TYPES, Api, Calls, percentile, read_events
from bench.receiver import serve_callbacks
from jobstream.config.tenants import token_digest
from jobstream_local import local_env
from jobstream_local.child import child_environment, start_child

SECTION = "## One tenant's receiver down"
TOKENS = {"alpha": "alpha-bench-token", "bravo": "bravo-bench-token"}
PROBE_INTERVAL_MS = 5_000
# Jobs each tenant submits per second, and how long each phase submits.
RATE_PER_S = 2.0
PHASES_S = {"healthy": 20.0, "outage": 50.0}
RECOVERY_TIMEOUT_S = 180.0
# Attempts under way when the pause lands may still reach the receiver this long after it.
PAUSE_SLACK_S = 3.0
# alpha's p95 while bravo is down, at most this times its p95 while bravo is healthy.
LATENCY_RATIO_BOUND = 1.5


@dataclass
class Receiver:
    """One tenant's receiver: answers 503 while `failing`, else 204; records every POST."""

    failing: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    posts: list[float] = field(default_factory=list)
    delivered: Counter[str] = field(default_factory=Counter)
    first_at: dict[str, float] = field(default_factory=dict)
    terminal: set[str] = field(default_factory=set)

    def answer(self, body: bytes) -> int:
        now = time.monotonic()
        event = json.loads(body)
        with self.lock:
            self.posts.append(now)
            if self.failing:
                return 503
            self.delivered[str(event["event_id"])] += 1
            self.first_at.setdefault(str(event["job_id"]), now)
            if event["type"] in TERMINAL_TYPES:
                self.terminal.add(str(event["job_id"]))
            return 204


def serving(receiver: Receiver) -> AbstractContextManager[str]:
    return serve_callbacks(receiver.answer)


@contextmanager
def stack() -> Iterator[tuple[str, dict[str, str]]]:
    folder = Path(tempfile.mkdtemp(prefix="jobstream-outage-"))
    registry = {
        "tenants": {
            name: {
                "api_tokens": [{"sha256": token_digest(token)}],
                "callback_origins": ["http://127.0.0.1:*"],
            }
            for name, token in TOKENS.items()
        }
    }
    tenants = folder / "tenants.json"
    tenants.write_text(json.dumps(registry), encoding="utf-8")
    child = start_child(
        child_environment(
            JOBSTREAM_LOCAL_CONCURRENCY="8",
            JOBSTREAM_LOCAL_ENV_DIR=str(folder),
            JOBSTREAM_TENANTS=str(tenants),
            # Retries from 5 s: a callback's 5th attempt comes after the pause rule's 30 s, as
            # with the deployed 30 s base (faster retries would spend 8 attempts before it).
            JOBSTREAM_CALLBACK_RETRY_BASE_MS="5000",
            JOBSTREAM_CALLBACK_RETRY_MAX_MS="30000",
            JOBSTREAM_ENDPOINT_PROBE_INTERVAL_MS=str(PROBE_INTERVAL_MS),
        )
    )
    try:
        path = local_env.file_for(folder, int(child.url.rsplit(":", 1)[1]))
        env = local_env.read(path)
        if env is None:
            raise RuntimeError(f"the stack at {child.url} wrote no local-env file")
        yield child.url, env
    finally:
        child.stop()


@dataclass
class Run:
    submitted: dict[str, dict[str, float]] = field(
        default_factory=lambda: {name: {} for name in TOKENS}
    )
    phase_of: dict[str, str] = field(default_factory=dict)
    in_flight_max: int = 0
    paused_at: float | None = None
    outage_end: float = 0.0
    recovered_s: float = float("inf")


def submit_phase(apis: dict[str, Api], run: Run, phase: str, seconds: float) -> None:
    """Both tenants submit RATE_PER_S jobs a second each for `seconds`."""
    started = time.monotonic()
    n = 0
    while (now := time.monotonic()) < started + seconds:
        for name, api in apis.items():
            key = f"{name}-{phase}-{n:04d}"
            status, body = api.call("POST /jobs", "POST", "/jobs", task(key, name))
            if status == 202 and isinstance(body, dict):
                job_id = str(body["job"]["job_id"])
                run.submitted[name][job_id] = now
                run.phase_of[job_id] = phase
        n += 1
        time.sleep(max(0.0, started + n / RATE_PER_S - time.monotonic()))


CALLBACK_URLS: dict[str, str] = {}


def task(key: str, tenant: str) -> dict[str, object]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "callback_url": CALLBACK_URLS[tenant],
        "params": {"target_id": "demo-illustration"},
    }


def watch(env: dict[str, str], run: Run, stopping: threading.Event) -> None:
    """Sample the callback queue's in-flight count, and note when bravo's endpoint pauses."""
    os.environ.update(env)
    import boto3

    from jobstream.domain import EndpointState
    from jobstream.runtime import runtime
    from jobstream.service.endpoints import endpoint_of

    rt = runtime()
    sqs = boto3.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL"])
    bravo = endpoint_of("bravo", CALLBACK_URLS["bravo"])
    while not stopping.wait(0.5):
        attributes = sqs.get_queue_attributes(
            QueueUrl=rt.settings.callback_queue_url or "",
            AttributeNames=["ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        run.in_flight_max = max(
            run.in_flight_max, int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))
        )
        if (
            run.paused_at is None
            and bravo is not None
            and rt.endpoints.get(bravo).state is EndpointState.PAUSED
        ):
            run.paused_at = time.monotonic()


def measure() -> dict[str, Any]:
    receivers = {name: Receiver() for name in TOKENS}
    run = Run()
    with serving(receivers["alpha"]) as alpha_url, serving(receivers["bravo"]) as bravo_url:
        CALLBACK_URLS.update(alpha=alpha_url, bravo=bravo_url)
        with stack() as (url, env):
            calls = Calls()
            apis = {name: Api(url, calls, token) for name, token in TOKENS.items()}
            stopping = threading.Event()
            watcher = threading.Thread(target=watch, args=(env, run, stopping), daemon=True)
            watcher.start()
            submit_phase(apis, run, "healthy", PHASES_S["healthy"])
            receivers["bravo"].failing = True
            submit_phase(apis, run, "outage", PHASES_S["outage"])
            run.outage_end = time.monotonic()
            receivers["bravo"].failing = False
            deadline = run.outage_end + RECOVERY_TIMEOUT_S
            while time.monotonic() < deadline and any(
                set(run.submitted[name]) - receivers[name].terminal for name in TOKENS
            ):
                time.sleep(0.5)
            # Callbacks are not ordered (consumers merge by `at`): an event that failed during
            # the outage may still wait for its retry after its job's terminal one arrived.
            events = job_events(apis, run)
            while time.monotonic() < deadline and undelivered(receivers, events):
                time.sleep(0.5)
            run.recovered_s = time.monotonic() - run.outage_end
            stopping.set()
            watcher.join()
            figures = judge(apis, receivers, run)
            figures["dead"] = dead_letters()
    return figures


def job_events(apis: dict[str, Api], run: Run) -> dict[str, list[str]]:
    """Every submitted job's event ids, by tenant (read once its terminal event is in)."""
    return {
        name: [
            event_id
            for job_id in run.submitted[name]
            for event_id in read_events(apis[name], job_id) or []
        ]
        for name in TOKENS
    }


def undelivered(receivers: dict[str, Receiver], events: dict[str, list[str]]) -> int:
    return sum(
        receivers[name].delivered[event_id] == 0 for name, ids in events.items() for event_id in ids
    )


def dead_letters() -> int:
    from jobstream.runtime import runtime
    from jobstream.service.dead_letters import list_dead

    return len(list_dead(runtime()))


def judge(apis: dict[str, Api], receivers: dict[str, Receiver], run: Run) -> dict[str, Any]:
    alpha, bravo = receivers["alpha"], receivers["bravo"]
    latency = {
        phase: [
            alpha.first_at.get(job_id, float("inf")) - at
            for job_id, at in run.submitted["alpha"].items()
            if run.phase_of[job_id] == phase
        ]
        for phase in PHASES_S
    }
    paused = run.paused_at
    posts_while_paused = (
        sum(paused + PAUSE_SLACK_S <= t <= run.outage_end for t in bravo.posts) if paused else -1
    )
    probes_due = (run.outage_end - paused) / (PROBE_INTERVAL_MS / 1000) if paused else 0.0
    missing, duplicated, events = 0, 0, 0
    for name, receiver in receivers.items():
        for job_id in run.submitted[name]:
            for event_id in read_events(apis[name], job_id) or []:
                events += 1
                seen = receiver.delivered[event_id]
                missing += seen == 0
                duplicated += seen > 1
    return {
        "jobs": {name: len(jobs) for name, jobs in run.submitted.items()},
        "events": events,
        "alpha_p95_healthy_s": percentile(latency["healthy"], 0.95),
        "alpha_p95_outage_s": percentile(latency["outage"], 0.95),
        "paused_after_s": (paused - (run.outage_end - PHASES_S["outage"])) if paused else -1.0,
        "bravo_posts_while_paused": posts_while_paused,
        "probes_due": probes_due,
        "recovered_s": run.recovered_s,
        "missing": missing,
        "duplicated": duplicated,
        "in_flight_max": run.in_flight_max,
    }


def failures(figures: dict[str, Any]) -> list[str]:
    found = []
    if figures["alpha_p95_outage_s"] > LATENCY_RATIO_BOUND * figures["alpha_p95_healthy_s"]:
        found.append("alpha's p95 during bravo's outage is over 1.5x its healthy p95")
    if figures["paused_after_s"] < 0:
        found.append("bravo's endpoint never paused")
    elif figures["bravo_posts_while_paused"] > figures["probes_due"] + 1:
        found.append("bravo's receiver saw more than the probes while paused")
    if figures["missing"] or figures["duplicated"] or figures["dead"]:
        found.append("a callback was lost, duplicated or dead-lettered")
    return found


def section(figures: dict[str, Any]) -> str:
    rows = [
        ("jobs submitted (alpha, bravo)", "{alpha}, {bravo}".format(**figures["jobs"])),
        ("events (every one a callback)", f"{figures['events']}"),
        ("alpha's callback p95, bravo healthy", f"{figures['alpha_p95_healthy_s']:.2f} s"),
        ("alpha's callback p95, bravo down", f"{figures['alpha_p95_outage_s']:.2f} s"),
        ("bravo's endpoint paused after", f"{figures['paused_after_s']:.1f} s of outage"),
        (
            "POSTs bravo's receiver saw while paused",
            f"{figures['bravo_posts_while_paused']} (probes due: {figures['probes_due']:.1f})",
        ),
        ("every callback delivered, after the recovery", f"{figures['recovered_s']:.1f} s"),
        ("callbacks missing, duplicated, dead-lettered", (
            f"{figures['missing']}, {figures['duplicated']}, {figures['dead']}"
        )),
        ("callback queue in flight, at most", f"{figures['in_flight_max']}"),
    ]  # fmt: skip
    intro = (
        "`python -m bench.endpoint_outage` (`make load` runs it last): tenants `alpha` and "
        f"`bravo` submit {RATE_PER_S:g} jobs a second each, {PHASES_S['healthy']:.0f} s with both "
        f"receivers healthy, then {PHASES_S['outage']:.0f} s with `bravo`'s answering 503, then "
        f"`bravo`'s is healthy again (retries from 5 s, a probe every {PROBE_INTERVAL_MS // 1000} "
        "s). Latency: a job's submission to its first callback."
    )
    closing = (
        "A paused endpoint's callbacks wait parked in the table, not in the queue: the in-flight "
        "count stays far under the bound of docs/capacity.md (f x 750 + 500 messages for f "
        "failing callbacks a second). Latencies come from one shared 2-core machine: they "
        "compare the phases of one run, and move with whatever else the machine runs."
    )
    table = ["| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join([SECTION, "", intro, "", *table, "", closing, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.endpoint_outage", description=__doc__)
    parser.parse_args(argv)
    figures = measure()
    text = section(figures)
    write_section(text, SECTION)
    print(text)
    found = failures(figures)
    for failure in found:
        print(f"FAIL: {failure}")
    if not found:
        print(f"PASS; section in {REPORT.relative_to(REPOSITORY)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
