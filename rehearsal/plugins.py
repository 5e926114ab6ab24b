"""Consumer-side suites run through the emulated API when the CLI has them:
`jobstream smoke --url --token` and `jobstream conformance --url --token --token-b`."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from rehearsal.toolchain import DEV_PYTHON, REPOSITORY, RehearsalError, clean_environment

TIMEOUT_S = 900
TAIL_LINES = 40


@dataclass(frozen=True)
class Suite:
    command: str
    with_second_tenant: bool


SUITES = (Suite("smoke", with_second_tenant=False), Suite("conformance", with_second_tenant=True))


def _cli(arguments: list[str], log: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_environment({"PYTHONPATH": f"{REPOSITORY / 'layers' / 'jobstream'}:{REPOSITORY}"})
    result = subprocess.run(  # noqa: S603 - our own CLI
        [str(DEV_PYTHON), "-m", "jobstream_cli", *arguments],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if log is not None:
        log.write_text(result.stdout + result.stderr, encoding="utf-8")
    return result


def available(suite: Suite) -> bool:
    return _cli([suite.command, "--help"]).returncode == 0


def run_suites(url: str, token: str, token_b: str, work_dir: Path) -> list[str]:
    """Run each suite the CLI offers; returns what ran and what was not there yet."""
    outcomes = []
    for suite in SUITES:
        if not available(suite):
            outcomes.append(f"`jobstream {suite.command}` is not in the CLI yet: not run")
            continue
        arguments = [suite.command, "--url", url, "--token", token]
        if suite.with_second_tenant:
            arguments += ["--token-b", token_b]
        log = work_dir / f"jobstream-{suite.command}.log"
        result = _cli(arguments, log)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).splitlines()[-TAIL_LINES:]
            raise RehearsalError(
                f"jobstream {suite.command}",
                f"exited {result.returncode} (log: {log}):\n" + "\n".join(tail),
            )
        outcomes.append(f"`jobstream {suite.command}` passed (log: {log.name})")
    return outcomes
