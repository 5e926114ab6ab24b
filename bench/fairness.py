"""`python -m bench.fairness`: a quiet tenant's jobs start promptly behind another's backlog.

Starts a local stack with two tenants (`noisy`, `quiet`) and a target whose jobs take about
0.4 s (4 catalog files read 100 ms apart), 4 workers at once. `noisy` submits 1,000 jobs; then
`quiet` submits 5, and each is followed until it is running. Work messages carry their tenant as
`MessageGroupId` (SQS fair queues on AWS; the local stack's moto serves groups in turn, as they
do): `quiet`'s jobs start within seconds, while most of `noisy`'s backlog still waits. In arrival
order they would wait for the whole backlog (about 100 s here).

Prints the figures and writes them as the "Fairness across tenants" section of docs/load.md
(after `python -m bench.load`, which rewrites the rest of that file); exit status 1 when a quiet
job did not start within the bound.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.load import REPORT, REPOSITORY, Api, Calls, run_parallel
from jobstream_local.child import child_environment, start_child

SECTION = "## Fairness across tenants"
TOKENS = {"noisy": "noisy-bench-token", "quiet": "quiet-bench-token"}
TARGET = {
    "id": "fair-bench",
    "enabled": True,
    "work_type": "illustration",
    "source": "catalog",
    "query": {"tags": ["landscape"], "expand": False},
    "limit": 1,
    "scan_limit": 4,
    "scan_delay_ms": 100,
    "timeout_ms": 600_000,
}
WORKERS = 4
# A quiet job must start within this long of its submission: a few seconds, not the backlog.
BOUND_S = 10.0
STARTED = frozenset({"running", "succeeded", "failed", "expired", "cancelled"})


def task(key: str) -> dict[str, object]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": TARGET["id"]},
    }


def submit(api: Api, key: str) -> str:
    status, body = api.call("POST /jobs", "POST", "/jobs", task(key))
    if status != 202 or not isinstance(body, dict):
        raise RuntimeError(f"{key}: {status} {body!r}"[:300])
    return str(body["job"]["job_id"])


def wait_until_started(api: Api, job_id: str, submitted: float, timeout_s: float) -> float:
    """Seconds from `submitted` until the job was seen running (or past it); inf past timeout."""
    deadline = submitted + timeout_s
    while time.monotonic() < deadline:
        status, body = api.call("GET /jobs/{job_id}", "GET", f"/jobs/{job_id}")
        if status == 200 and isinstance(body, dict) and body.get("status") in STARTED:
            return time.monotonic() - submitted
        time.sleep(0.05)
    return float("inf")


def queued(api: Api) -> int:
    """How many of the caller's jobs are queued (every page of GET /jobs?status=queued)."""
    count, cursor = 0, ""
    while True:
        path = "/jobs?status=queued&limit=100" + (f"&cursor={cursor}" if cursor else "")
        status, page = api.call("GET /jobs", "GET", path)
        if status != 200 or not isinstance(page, dict):
            raise RuntimeError(f"GET /jobs: {status} {page!r}"[:300])
        count += len(page["jobs"])
        cursor = str(page.get("next_cursor") or "")
        if not cursor:
            return count


def run(backlog: int) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="jobstream-fairness-"))
    targets = folder / "targets.json"
    targets.write_text(json.dumps({"account": "bench", "targets": [TARGET]}), encoding="utf-8")
    child = start_child(
        child_environment(
            JOBSTREAM_LOCAL_CONCURRENCY=str(WORKERS),
            JOBSTREAM_LOCAL_ENV_DIR=str(folder),
            JOBSTREAM_API_TOKENS=",".join(f"{t}={token}" for t, token in TOKENS.items()),
            JOBSTREAM_TARGETS=str(targets),
        )
    )
    try:
        calls = Calls()
        noisy = Api(child.url, calls, TOKENS["noisy"])
        quiet = Api(child.url, calls, TOKENS["quiet"])
        started = time.monotonic()

        def submit_noisy(key: str) -> None:
            submit(noisy, key)

        run_parallel(
            "noisy submitting", [f"noisy-{n:05d}" for n in range(backlog)], 8, submit_noisy
        )
        noisy_submit_s = time.monotonic() - started
        waits: list[float] = []
        lock = threading.Lock()

        def follow(key: str) -> None:
            submitted = time.monotonic()
            wait = wait_until_started(quiet, submit(quiet, key), submitted, BOUND_S * 6)
            with lock:
                waits.append(wait)

        run_parallel("quiet submitting", [f"quiet-{n}" for n in range(5)], 5, follow)
        noisy_queued = queued(noisy)
    finally:
        child.stop()
    return {
        "backlog": backlog,
        "noisy_submit_s": noisy_submit_s,
        "quiet_max_s": max(waits),
        "quiet_median_s": statistics.median(waits),
        "noisy_queued": noisy_queued,
    }


def section(figures: dict[str, float]) -> str:
    intro = (
        "`python -m bench.fairness` (`make load` runs it after the load test): tenant `noisy` "
        f"submits {figures['backlog']:,.0f} jobs of about 0.4 s each "
        f"({figures['noisy_submit_s']:.1f} s to submit), {WORKERS} workers at once; then tenant "
        "`quiet` submits 5 and each is followed until it runs."
    )
    closing = (
        "Work messages carry their tenant as `MessageGroupId`: an SQS fair queue on AWS, and on "
        "the local stack a moto that serves message groups in turn "
        "(`jobstream_local/moto_fair_queues.py`). In arrival order, `quiet`'s jobs would have "
        "waited behind the whole backlog."
    )
    rows = [
        ("`quiet`'s jobs, submission to running: median", f"{figures['quiet_median_s']:.2f} s"),
        ("`quiet`'s jobs, submission to running: slowest", f"{figures['quiet_max_s']:.2f} s"),
        (
            "`noisy`'s jobs still queued when `quiet`'s had started",
            f"{figures['noisy_queued']:,.0f}",
        ),
    ]
    table = ["| | |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join([SECTION, "", intro, "", *table, "", closing, ""])


def write_section(text: str, heading: str = SECTION) -> None:
    """docs/load.md up to `heading` (a section of its own, the last), then `text`."""
    report = REPORT.read_text(encoding="utf-8") if REPORT.exists() else ""
    kept = report.split(heading, 1)[0].rstrip("\n")
    REPORT.write_text((kept + "\n\n" if kept else "") + text, encoding="utf-8")


def report_section(lines: list[str], heading: str, *, passed: bool) -> int:
    """Print a run's section, write it into docs/load.md, and its exit status."""
    text = "\n".join(lines)
    print(text)
    write_section(text, heading)
    return 0 if passed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__)
    parser.add_argument("--backlog", type=int, default=1000, help="noisy's jobs (1000)")
    args = parser.parse_args(argv)
    if args.backlog < 1:
        parser.error("--backlog must be positive")
    figures = run(args.backlog)
    text = section(figures)
    write_section(text)
    print(text)
    if figures["quiet_max_s"] > BOUND_S:
        print(f"FAIL: a quiet job waited {figures['quiet_max_s']:.1f} s (bound {BOUND_S:.0f} s)")
        return 1
    print(f"PASS; section in {REPORT.relative_to(REPOSITORY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
