"""Where the rehearsal's tools live and how it runs them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
WORK_DIR = REPOSITORY / ".aws-sam" / "rehearsal"
SAM = REPOSITORY / ".venv-sam" / "bin" / "sam"
EMULATOR_PYTHON = REPOSITORY / ".venv-rehearsal" / "emulator" / "bin" / "python"
LAMBDA_PYTHON = REPOSITORY / ".venv-rehearsal" / "lambda-runtime" / "bin" / "python"
DEV_PYTHON = Path(sys.executable)
REGION = "us-east-1"
# The emulator's root credentials (ministack's defaults); the functions get their roles' own.
ROOT_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
TAIL_LINES = 40


def lambda_runtime_version() -> str:
    """The Python version (3.x) of the rehearsal's Lambda runtime virtualenv."""
    config = LAMBDA_PYTHON.parent.parent / "pyvenv.cfg"
    require(config, "run `make rehearse` (it sets up .venv-rehearsal)")
    for line in config.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key.strip() in {"version", "version_info"}:
            return ".".join(value.strip().split(".")[:2])
    raise RehearsalError("setup", f"{config} names no Python version")


class RehearsalError(Exception):
    """A step of the rehearsal failed; the message says what and, where known, why."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The host environment without anything that could leak into a tool or a function:
    no PYTHONPATH (the Makefile exports the layer's source), no AWS profile or session."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update(extra or {})
    return env


def aws_environment(endpoint: str) -> dict[str, str]:
    return clean_environment(
        {
            **ROOT_CREDENTIALS,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "SAM_CLI_TELEMETRY": "0",
        }
    )


def require(path: Path, how: str) -> None:
    if not path.exists():
        raise RehearsalError("setup", f"{path.relative_to(REPOSITORY)} is missing: {how}")


def run_tool(
    step: str,
    command: Sequence[str | Path],
    env: Mapping[str, str],
    log: Path,
    cwd: Path = REPOSITORY,
) -> float:
    """Run a command, its output to `log`; fail with the output's tail. Returns seconds taken."""
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out:
        result = subprocess.run(  # noqa: S603 - our own tools, arguments built here
            [str(part) for part in command],
            cwd=cwd,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if result.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
        raise RehearsalError(
            step, f"`{Path(command[0]).name} ...` exited {result.returncode}:\n" + "\n".join(tail)
        )
    return time.monotonic() - started
