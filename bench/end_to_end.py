"""End-to-end throughput through the local stack: submit -> succeeded -> callback received.

The stack runs as its own process (`python -m jobstream_local`), exactly as `make run` starts it;
consumers are threads here speaking HTTP, and a local receiver takes the callbacks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
TOKEN = "local-dev-token"  # noqa: S105 - the local stack's documented default
TIMEOUT_S = 120


@dataclass(frozen=True)
class Throughput:
    consumers: int
    jobs: int
    seconds: float

    @property
    def jobs_per_second(self) -> float:
        return self.jobs / self.seconds


class _Terminal:
    """Which jobs' terminal callbacks have arrived."""

    def __init__(self) -> None:
        self.jobs: set[str] = set()
        self.condition = threading.Condition()

    def add(self, job_id: str) -> None:
        with self.condition:
            self.jobs.add(job_id)
            self.condition.notify_all()

    def wait_for(self, job_id: str, timeout: float) -> bool:
        with self.condition:
            return self.condition.wait_for(lambda: job_id in self.jobs, timeout=timeout)


@contextmanager
def _receiver(terminal: _Terminal) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if body["type"] in {"job.succeeded", "job.failed", "job.expired", "job.cancelled"}:
                terminal.add(body["job_id"])
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/callbacks"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _stack() -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSTREAM_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)]),
        JOBSTREAM_PORT="0",
        JOBSTREAM_LOCAL_CONCURRENCY="8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "jobstream_local"],
        cwd=REPOSITORY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    if process.stdout is None:
        raise RuntimeError("no stdout from the local stack")
    url = ""
    for line in process.stdout:
        if "ready" in line:
            url = next(word for word in line.split() if word.startswith("http://"))
            break
    try:
        if not url:
            raise RuntimeError("the local stack did not start")
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def _submit(base_url: str, key: str, callback_url: str) -> str:
    task = {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "callback_url": callback_url,
        "params": {"target_id": "demo-illustration"},
    }
    request = urllib.request.Request(
        f"{base_url}/jobs",
        data=json.dumps(task).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        job_id: str = json.loads(response.read())["job"]["job_id"]
        return job_id


def _consumer(
    base_url: str, callback_url: str, terminal: _Terminal, prefix: str, jobs: int
) -> None:
    for index in range(jobs):
        job_id = _submit(base_url, f"{prefix}-{index}", callback_url)
        if not terminal.wait_for(job_id, TIMEOUT_S):
            raise TimeoutError(f"job {job_id} did not finish in {TIMEOUT_S} s")


def throughput(consumer_counts: tuple[int, ...] = (1, 8), jobs_each: int = 6) -> list[Throughput]:
    """Each consumer submits jobs one after another and waits for each terminal callback."""
    results = []
    terminal = _Terminal()
    with _stack() as base_url, _receiver(terminal) as callback_url:
        for consumers in consumer_counts:
            threads = [
                threading.Thread(
                    target=_consumer,
                    args=(base_url, callback_url, terminal, f"bench-{consumers}-{n}", jobs_each),
                )
                for n in range(consumers)
            ]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - started
            results.append(Throughput(consumers, consumers * jobs_each, elapsed))
            print(f"  {consumers} consumer(s): {consumers * jobs_each} jobs in {elapsed:.1f} s")
    return results
