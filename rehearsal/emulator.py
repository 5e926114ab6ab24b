"""The local AWS emulator: ministack in its own virtualenv, IAM enforced, on a free port."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rehearsal.toolchain import (
    EMULATOR_PYTHON,
    LAMBDA_PYTHON,
    REPOSITORY,
    ROOT_CREDENTIALS,
    RehearsalError,
    clean_environment,
    require,
)

LAUNCHER = REPOSITORY / "rehearsal" / "emulator_main.py"
# ministack unpacks each function worker's code and layer (~75 MB) into its TMPDIR: in memory
# where the machine offers it (on a busy disk, unpacking and deleting them took minutes).
MEMORY_TMP = Path("/dev/shm")  # noqa: S108 - only the parent of a private mkdtemp directory
START_TIMEOUT_S = 60.0
SHIM_TAG = "[rehearsal-shim]"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def receiver_host() -> str:
    """This machine's own non-loopback IPv4 address, for the callback receivers: the deployed
    functions run "on AWS" (the emulator sets AWS_LAMBDA_FUNCTION_NAME), where no origin may
    reach loopback, so the receivers must listen where a private network address leads."""
    candidates: list[str] = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        # A UDP connect sends nothing: it only asks the kernel which address routes outward.
        probe.connect(("10.255.255.255", 1))
        candidates.append(probe.getsockname()[0])
    with contextlib.suppress(OSError):
        candidates += socket.gethostbyname_ex(socket.gethostname())[2]
    for address in candidates:
        if not ipaddress.ip_address(address).is_loopback and address != "0.0.0.0":  # noqa: S104
            return address
    raise RehearsalError(
        "receivers",
        "this machine has no non-loopback IPv4 address: on AWS no callback may reach loopback, "
        "so the rehearsal's receivers need one (any private address will do)",
    )


@dataclass
class Emulator:
    log_path: Path
    lambda_python_version: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = None
    _tmp: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        require(EMULATOR_PYTHON, "run `make rehearse` (it sets up .venv-rehearsal)")
        require(LAMBDA_PYTHON, "run `make rehearse` (it sets up .venv-rehearsal)")
        self._tmp = Path(
            tempfile.mkdtemp(prefix="rehearsal-", dir=MEMORY_TMP if MEMORY_TMP.is_dir() else None)
        )
        # The functions inherit this environment (ministack adds the template's variables to it),
        # so it holds nothing of the developer's shell: a variable the template does not set
        # must be missing in the rehearsal as it is on AWS.
        env = clean_environment(
            {
                **ROOT_CREDENTIALS,
                "AUTH": "true",
                "GATEWAY_PORT": str(self.port),
                "BIND_HOST": "127.0.0.1",
                "TMPDIR": str(self._tmp),
                "REHEARSAL_LAMBDA_PYTHON": str(LAMBDA_PYTHON),
                "REHEARSAL_LAMBDA_PYTHON_VERSION": self.lambda_python_version,
            }
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(  # noqa: S603 - our own launcher
            [str(EMULATOR_PYTHON), str(LAUNCHER)],
            cwd=self.log_path.parent,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RehearsalError("emulator", "ministack exited:\n" + self.log_tail())
            try:
                with urllib.request.urlopen(f"{self.endpoint}/_ministack/health", timeout=2) as r:  # noqa: S310
                    if json.load(r).get("services"):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.3)
        raise RehearsalError("emulator", "ministack did not answer in time:\n" + self.log_tail())

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def shim_lines(self) -> list[str]:
        """What the fidelity shims refused (a denied schedule or API invocation...)."""
        lines = self.log_text().splitlines()
        return [line.split(SHIM_TAG, 1)[1].strip() for line in lines if SHIM_TAG in line]

    def stop(self) -> None:
        """Stop ministack and the function workers it started (its own process group)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
