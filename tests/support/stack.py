"""Starting and stopping the local stack (`python -m jobstream_local`) as a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

# The stack tests' targets: one quick, one slow.
TARGETS = {
    "account": "default",
    "targets": [
        {
            "id": "demo-illustration",
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["landscape"]},
        },
        {
            # Slow on purpose (a pause per work scanned): cancel reliably finds it running.
            "id": "slow-illustration",
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["landscape"]},
            "limit": 60,
            "scan_limit": 60,
            "scan_delay_ms": 500,
        },
    ],
}


def environment(**extra: str) -> dict[str, str]:
    """This process's environment without AWS or jobstream settings, on a free port, and with a
    local-env file of its own: a test stack never overwrites (nor, when it stops, removes) the one
    a developer's `make run` left for the CLI, nor another test stack's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSTREAM_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)])
    env["JOBSTREAM_PORT"] = "0"
    env["JOBSTREAM_LOCAL_ENV_FILE"] = str(
        Path(tempfile.mkdtemp(prefix="jobstream-stack-")) / "local-env.json"
    )
    env.update(extra)
    return env


# Everything each stack wrote to stderr, drained as it comes so a full pipe never blocks it.
STDERR: dict[int, list[str]] = {}


def drain(process: subprocess.Popen[str]) -> None:
    lines = STDERR.setdefault(process.pid, [])
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line)


def stderr(process: subprocess.Popen[str]) -> str:
    return "".join(STDERR.get(process.pid, []))


def stop(process: subprocess.Popen[str], timeout: float = 60) -> str:
    """Ctrl-C the stack and wait; on a hang, dump every thread's stack (faulthandler)."""
    process.send_signal(signal.SIGINT)
    try:
        stdout, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        process.communicate()
        time.sleep(0.5)
        raise AssertionError(f"the stack did not stop: {stderr(process)}") from None
    return stdout


def start(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "jobstream_local"],
        cwd=REPOSITORY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    threading.Thread(target=drain, args=(process,), daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if "ready" in line:
            url = next(word for word in line.split() if word.startswith("http://"))
            return process, url
    process.kill()
    process.communicate(timeout=10)
    raise AssertionError(f"local stack did not become ready: {stderr(process)}")
