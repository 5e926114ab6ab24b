"""The local stack as a child process (`python -m jobstream_local`): how the tests and the
benchmarks start one, wait until it serves, keep what it writes and stop it."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

REPOSITORY: Final = Path(__file__).resolve().parent.parent
# How long a stack may take to say it is ready, and to stop after Ctrl-C.
READY_WITHIN_S: Final = 60.0
STOPPED_WITHIN_S: Final = 60.0


def child_environment(**settings: str) -> dict[str, str]:
    """This process's environment without AWS or jobstream settings, with the layer importable
    and a free port, then `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSTREAM_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)])
    env["JOBSTREAM_PORT"] = "0"
    env.update(settings)
    return env


@dataclass
class ChildStack:
    process: subprocess.Popen[str]
    url: str
    # Every line it wrote, read as it comes, so that a full pipe never blocks it: stdout has the
    # functions' logs (as on Lambda), stderr the stack's own.
    stdout: list[str]
    stderr: list[str]
    _readers: list[threading.Thread] = field(default_factory=list)

    def stop(self, timeout: float = STOPPED_WITHIN_S) -> int:
        """Ctrl-C it and wait for its exit status; on a hang, have it dump every thread's stack
        (faulthandler) into stderr, and raise with that."""
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            _end(self.process)
            self._finish_reading()
            raise RuntimeError("the local stack did not stop:\n" + "".join(self.stderr)) from None
        self._finish_reading()
        return self.process.returncode

    def _finish_reading(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        for reader in self._readers:
            reader.join(timeout=5)


def _end(process: subprocess.Popen[str]) -> None:
    """Wait a little for it to exit, then kill it: never leave it running."""
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _reader(target: Callable[[], object], name: str) -> threading.Thread:
    reader = threading.Thread(target=target, name=name, daemon=True)
    reader.start()
    return reader


def start_child(env: Mapping[str, str]) -> ChildStack:
    """Start a stack with `env` and return once it says it is ready (its URL is in that line)."""
    process = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "jobstream_local"],
        cwd=REPOSITORY,
        # Its standard input is a pipe from this process: it stops when the pipe closes, so a
        # killed test run leaves no stack serving on.
        env={**env, "JOBSTREAM_LOCAL_STOP_WITH_STDIN": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.stdout, process.stderr
    if stdout is None or stderr is None:
        raise RuntimeError("no pipes to the local stack")
    stdout_lines: list[str] = []
    stderr_lines: list[str] = []
    # The ready line's URL, or "" once stdout has ended without one.
    announced: queue.Queue[str] = queue.Queue()

    def read_stdout() -> None:
        for line in stdout:
            stdout_lines.append(line)
            if "ready" in line and announced.empty():
                announced.put(next(word for word in line.split() if word.startswith("http://")))
        announced.put("")

    readers = [
        _reader(lambda: stderr_lines.extend(stderr), "stack-stderr"),
        _reader(read_stdout, "stack-stdout"),
    ]
    try:
        url = announced.get(timeout=READY_WITHIN_S)
    except queue.Empty:
        url = ""
    if url:
        return ChildStack(process, url, stdout_lines, stderr_lines, readers)
    process.kill()
    _end(process)
    for reader in readers:
        reader.join(timeout=5)
    raise RuntimeError("the local stack did not become ready:\n" + "".join(stderr_lines))
