"""End to end through the local stack: throughput (submit -> succeeded -> terminal callback
received), the CPU each process spends per job, and callback latency (event recorded -> POST
received).

The stack runs as its own processes (`python -m jobstream_local`, which starts moto in a process
of its own), exactly as `make run` starts it; consumers are threads here speaking HTTP, and a
local receiver takes the callbacks. An event's `at` is when the stack recorded it (its clock is
this machine's), so its callback's latency is the receiver's clock at the POST minus `at`.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.receiver import serve_callbacks

REPOSITORY = Path(__file__).resolve().parent.parent
TOKEN = "local-dev-token"  # noqa: S105 - the local stack's documented default
TIMEOUT_S = 120
CONCURRENCY = 8
TERMINAL = frozenset({"job.succeeded", "job.failed", "job.expired", "job.cancelled"})
# (consumers, jobs each): one consumer alone, then eight at once.
PHASES = ((1, 8), (8, 12))
# Jobs run one at a time, nothing else going on: the idle callback latency.
IDLE_JOBS = 15
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Throughput:
    consumers: int
    jobs: int
    seconds: float
    # CPU seconds per job: the stack's process, moto's, and this one (consumers and receiver);
    # None where /proc cannot say.
    cpu_ms: tuple[float, float, float] | None
    load: float  # the 1-minute load average when the phase ended

    @property
    def jobs_per_second(self) -> float:
        return self.jobs / self.seconds


@dataclass(frozen=True)
class Latency:
    phase: str
    millis: list[float]

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.millis)
        return ordered[max(1, math.ceil(fraction * len(ordered))) - 1] if ordered else 0.0


@dataclass
class EndToEnd:
    flows: list[Throughput] = field(default_factory=list)
    latencies: list[Latency] = field(default_factory=list)
    cpus: int = os.cpu_count() or 1


class _Receiver:
    """Which jobs' terminal callbacks have arrived, and each callback's latency."""

    def __init__(self) -> None:
        self.jobs: set[str] = set()
        self.latencies: list[float] = []
        self.condition = threading.Condition()

    def add(self, body: dict[str, Any], received_ms: float) -> None:
        with self.condition:
            self.latencies.append(received_ms - float(body["at"]))
            if body["type"] in TERMINAL:
                self.jobs.add(body["job_id"])
            self.condition.notify_all()

    def wait_for(self, job_id: str, timeout: float) -> bool:
        with self.condition:
            return self.condition.wait_for(lambda: job_id in self.jobs, timeout=timeout)

    def take_latencies(self) -> list[float]:
        with self.condition:
            taken, self.latencies = self.latencies, []
        return taken


def _receiver(receiver: _Receiver) -> AbstractContextManager[str]:
    def answer(body: bytes) -> int:
        receiver.add(json.loads(body), time.time() * 1000)
        return 204

    return serve_callbacks(answer)


@contextmanager
def _stack() -> Iterator[tuple[str, int]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSTREAM_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)]),
        JOBSTREAM_PORT="0",
        JOBSTREAM_LOCAL_CONCURRENCY=str(CONCURRENCY),
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
        yield url, process.pid
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc), None when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rpartition(")")[2].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _cpu(stack_pid: int) -> tuple[float, float, float] | None:
    """CPU seconds so far: the stack, its children (moto), and this process."""
    stack = _cpu_seconds(stack_pid)
    children = [_cpu_seconds(child) for child in _children(stack_pid)]
    own = _cpu_seconds(os.getpid())
    if stack is None or own is None or any(child is None for child in children):
        return None
    return stack, sum(child for child in children if child is not None), own


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
    base_url: str, callback_url: str, receiver: _Receiver, prefix: str, jobs: int
) -> None:
    for index in range(jobs):
        job_id = _submit(base_url, f"{prefix}-{index}", callback_url)
        if not receiver.wait_for(job_id, TIMEOUT_S):
            raise TimeoutError(f"job {job_id} did not finish in {TIMEOUT_S} s")


def _phase(
    base_url: str,
    callback_url: str,
    receiver: _Receiver,
    stack_pid: int,
    *,
    consumers: int,
    each: int,
) -> Throughput:
    threads = [
        threading.Thread(
            target=_consumer,
            args=(base_url, callback_url, receiver, f"bench-{consumers}-{n}", each),
        )
        for n in range(consumers)
    ]
    before = _cpu(stack_pid)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    after = _cpu(stack_pid)
    jobs = consumers * each
    cpu_ms = None
    if before is not None and after is not None:
        stack, moto, own = (1000 * (a - b) / jobs for a, b in zip(after, before, strict=True))
        cpu_ms = (stack, moto, own)
    flow = Throughput(consumers, jobs, elapsed, cpu_ms, os.getloadavg()[0])
    print(f"  {consumers} consumer(s): {jobs} jobs in {elapsed:.1f} s", flush=True)
    return flow


def measure() -> EndToEnd:
    """Idle callback latency, then each throughput phase (with its callbacks' latency)."""
    result = EndToEnd()
    receiver = _Receiver()
    with _stack() as (base_url, stack_pid), _receiver(receiver) as callback_url:
        _consumer(base_url, callback_url, receiver, "bench-warm", 2)  # first calls set up
        receiver.take_latencies()
        _consumer(base_url, callback_url, receiver, "bench-idle", IDLE_JOBS)
        result.latencies.append(
            Latency(f"idle: {IDLE_JOBS} jobs one at a time", receiver.take_latencies())
        )
        for consumers, each in PHASES:
            flow = _phase(
                base_url, callback_url, receiver, stack_pid, consumers=consumers, each=each
            )
            result.flows.append(flow)
            result.latencies.append(
                Latency(f"{consumers} consumer(s), {flow.jobs} jobs", receiver.take_latencies())
            )
    return result


def report_lines(result: EndToEnd) -> list[str]:
    lines = [
        "## End to end through the local stack",
        "",
        "Submit -> `succeeded` -> terminal callback received, each consumer submitting its jobs",
        f"one after another; the stack runs {CONCURRENCY} concurrent invocations per queue, and",
        "moto in a process of its own (docs/operations.md, the local stack). These numbers",
        "measure the local stack on this machine, not AWS. CPU per job is what each process",
        "spent (user + system, from /proc) divided by the jobs: the stack (HTTP API, pollers,",
        "the functions and botocore's side of every call), moto (every AWS call's other side),",
        f"and the bench itself (consumers and receiver). Machine: {result.cpus} CPUs, shared;",
        "its 1-minute load average when the phase ended says how much of them the run had.",
        "The bounded load test (`python -m bench.load`) is in docs/load.md.",
        "",
        "| consumers | jobs | seconds | jobs/s | CPU ms per job: stack / moto / bench | load |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for flow in result.flows:
        cpu = "-" if flow.cpu_ms is None else " / ".join(f"{ms:.0f}" for ms in flow.cpu_ms)
        lines.append(
            f"| {flow.consumers} | {flow.jobs} | {flow.seconds:.1f} | "
            f"{flow.jobs_per_second:.2f} | {cpu} | {flow.load:.1f} |"
        )
    busiest = max(result.flows, key=lambda flow: flow.jobs)
    if busiest.cpu_ms is not None:
        stack, moto, own = busiest.cpu_ms
        ceiling = min(1000 / max(stack, moto), 1000 * result.cpus / (stack + moto + own))
        lines += [
            "",
            f"What the CPU per job allows ({busiest.consumers} consumers), an estimate, not a",
            f"measure: each process has one interpreter, so moto's process ({moto:.0f} ms a job)",
            f"and the stack's ({stack:.0f} ms) each run at most 1000 ms a second, and all of them",
            f"({stack + moto + own:.0f} ms a job) share {result.cpus} cores: at most {ceiling:.1f}",
            "jobs per second on an otherwise idle machine. The measured rate is lower by what the",
            "machine's other work took (the load average) and by the waits between the processes.",
        ]
    lines += [
        "",
        "### Callback latency (event recorded -> POST received)",
        "",
        "Every callback of the phase: the receiver's clock at the POST minus the event's `at`.",
        "",
        "| phase | callbacks | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {latency.phase} | {len(latency.millis)} | {latency.percentile(0.5):.0f} | "
        f"{latency.percentile(0.9):.0f} | {latency.percentile(0.99):.0f} | "
        f"{max(latency.millis, default=0):.0f} |"
        for latency in result.latencies
    ]
    lines.append("")
    return lines
