"""The consumer-side suites, run through the emulated API as a consumer would run them against a
deployment: `jobstream smoke` and `jobstream conformance` (both tenants, tenant A's callbacks
received and verified by the kit's own listener)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rehearsal.cli import run_cli
from rehearsal.plan import Credentials
from rehearsal.toolchain import RehearsalError

TAIL_LINES = 40
# The shipped targets (layers/jobstream/jobstream/config/targets.default.json): a quick one to
# run to the end, a slow one to catch active and cancel. With two enabled targets every Task
# names its target.
QUICK_TARGET = "demo-illustration"
SLOW_TARGET = "demo-slow"
# Seconds a suite's job may take: a cold worker in the emulator unpacks the layer first.
JOB_TIMEOUT_S = 180


@dataclass(frozen=True)
class Suite:
    command: str
    arguments: list[str]


def suites(credentials: Credentials, callback_receiver: str) -> list[Suite]:
    """What each suite is given; `callback_receiver` (HOST:PORT) is an origin of tenant A."""
    return [
        Suite(
            "smoke",
            [
                *("--target-id", QUICK_TARGET, "--cancel-target-id", SLOW_TARGET),
                *("--timeout", str(JOB_TIMEOUT_S)),
            ],
        ),
        Suite(
            "conformance",
            [
                "--token-b", credentials.token_b,
                "--params", json.dumps({"target_id": QUICK_TARGET}),
                "--cancel-params", json.dumps({"target_id": SLOW_TARGET}),
                "--timeout", str(JOB_TIMEOUT_S),
                "--callback-receiver", callback_receiver,
                "--callback-secret", credentials.signing_secret,
                "--callback-token", credentials.callback_token,
            ],
        ),
    ]  # fmt: skip


def _summary(command: str, report: Any) -> str:
    """One line of what a suite's JSON report says, or why it is not a pass."""
    if command == "conformance":
        totals = report.get("totals") or {}
        skipped = [item["id"] for item in report.get("items", []) if item["outcome"] == "skip"]
        if skipped:
            # Every option a skip asks for was given: a skip means an item did not run.
            raise RehearsalError("jobstream conformance", f"items skipped: {skipped}")
        return ", ".join(f"{count} {outcome}" for outcome, count in sorted(totals.items()))
    steps = report.get("steps") or []
    if report.get("ok") is not True or not steps:
        raise RehearsalError("jobstream smoke", f"the report is no pass: {report}")
    return "steps " + ", ".join(str(step["step"]) for step in steps)


def _report(output: str) -> Any:
    """The JSON document a suite printed with `-o json` (after any progress lines)."""
    start = output.find("{")
    return json.loads(output[start:]) if start >= 0 else {}


def run_suites(
    url: str, credentials: Credentials, callback_receiver: str, work_dir: Path
) -> list[str]:
    """Run both suites as tenant A against `url`; a failing one fails the rehearsal."""
    outcomes = []
    for suite in suites(credentials, callback_receiver):
        log = work_dir / f"jobstream-{suite.command}.log"
        arguments = ["--url", url, "--token", credentials.token_a, "-o", "json", suite.command]
        result = run_cli([*arguments, *suite.arguments], log=log)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).splitlines()[-TAIL_LINES:]
            raise RehearsalError(
                f"jobstream {suite.command}",
                f"exited {result.returncode} (log: {log}):\n" + "\n".join(tail),
            )
        try:
            summary = _summary(suite.command, _report(result.stdout))
        except (ValueError, KeyError, TypeError) as error:
            raise RehearsalError(
                f"jobstream {suite.command}", f"unreadable report ({error}; log: {log})"
            ) from None
        outcomes.append(f"`jobstream {suite.command}` passed: {summary} (log: {log.name})")
    return outcomes
