"""Forty jobs at once against one Pixiv account (the fake Pixiv on loopback, through a target's
`api_host`): limited to 2 requests at once, 429 with `Retry-After: 2` beyond, and a stretch of
503s. On a resource with `max_concurrent: 2` every job succeeds, the fake never sees more than 2
requests at once, and the 503 stretch, shorter than the jobs' retry budget, fails none.

Real time (the fake is a server), eight worker threads taking work messages as Lambda would:
a job that finds every slot held is done with its message, and a release sends it again."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.fake_pixiv import FakePixiv
from bench.source_limits import MAX_CONCURRENT, TARGET, pixiv_targets
from jobstream.clock import now_ms
from jobstream.queue import JobDispatch
from jobstream.runtime import Runtime
from jobstream.service import admission, execution, jobs

JOBS = 40
WORKERS = 8
TOKEN = "fake-account-token"
OUTAGE_S = 2.0
TIMEOUT_S = 150.0


class Messages:
    """The work queue: every message sent goes to the workers' queue."""

    def __init__(self) -> None:
        self.waiting: queue.Queue[str] = queue.Queue()
        self.sent = 0

    def send(self, dispatches: list[JobDispatch]) -> int:
        for dispatch in dispatches:
            self.sent += 1
            self.waiting.put(dispatch.job_id)
        return len(dispatches)

    def depth(self) -> int:
        return self.waiting.qsize()

    def delay(self, receipt_handle: str, delay_ms: int) -> None:
        del receipt_handle, delay_ms


def work(
    rt: Runtime, messages: Messages, outcomes: Counter[str], stopping: threading.Event
) -> None:
    while not stopping.is_set():
        try:
            job_id = messages.waiting.get(timeout=0.1)
        except queue.Empty:
            continue
        outcomes[execution.execute(rt, job_id)] += 1


def test_forty_jobs_on_two_slots_all_succeed_within_the_accounts_limits(
    rt: Runtime, targets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBSTREAM_PIXIV_REFRESH_TOKEN", TOKEN)
    messages = Messages()
    with FakePixiv(max_concurrent=MAX_CONCURRENT, retry_after_s=2, latency_s=0.05) as pixiv:
        targets_path.write_text(json.dumps(pixiv_targets(pixiv.url)), encoding="utf-8")
        live = replace(rt, clock=now_ms, sleep=time.sleep, work=messages)  # type: ignore[arg-type]
        job_ids = []
        for n in range(JOBS):
            task: dict[str, Any] = {
                "protocol_version": "1",
                "job_type": "candidate_search",
                "idempotency_key": f"forty-{n:02d}",
                "params": {"target_id": TARGET},
            }
            status, body = admission.submit(live, "acme", task, None)
            assert status == 202, body
            job_ids.append(body["job"]["job_id"])
        outcomes: Counter[str] = Counter()
        stopping = threading.Event()
        workers = [
            threading.Thread(target=work, args=(live, messages, outcomes, stopping), daemon=True)
            for _ in range(WORKERS)
        ]
        for worker in workers:
            worker.start()
        messages.send([JobDispatch(job_id, "acme") for job_id in job_ids])  # the dispatcher's
        # A stretch of 503s once the jobs are under way.
        time.sleep(1.0)
        pixiv.outage(OUTAGE_S)
        deadline = time.monotonic() + TIMEOUT_S
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline:
            statuses = {
                job_id: jobs.get_job(live, "acme", job_id, None)["status"] for job_id in job_ids
            }
            if all(status not in {"queued", "running"} for status in statuses.values()):
                break
            time.sleep(0.5)
        stopping.set()
        for worker in workers:
            worker.join(timeout=10)
        stats = pixiv.stats()
    assert Counter(statuses.values()) == {"succeeded": JOBS}, (statuses, outcomes)
    assert stats.peak_concurrency[TOKEN] <= MAX_CONCURRENT
    assert stats.rate_limited == 0  # the slots kept the account within its limit
    assert stats.unavailable >= 1  # the outage was met, and retried through
    # Most jobs waited for a slot without holding a worker (how many depends on the timing).
    assert outcomes["waiting"] >= JOBS // 2
    attempts = [jobs.get_job(live, "acme", job_id, None)["attempt"] for job_id in job_ids]
    assert max(attempts) >= 2
    assert live.store.resources().state("pixiv").holders == {}
