"""docs/deploy.md's commands against the emulator: `sam deploy --guided` answered as the guide
says, up to its change set, and `make teardown` (tools/teardown.py) of the rehearsed stack, after
which nothing of it may be left but what the guide names.

The guided answers come from the template, as SAM CLI 1.170 asks them: stack name, region, one
prompt per parameter (Enter keeps the default), confirm changes (Y), IAM role creation (Y),
disable rollback (N), one "has no authentication. Is this okay?" per HTTP API event (y: the
functions authenticate), save arguments (N: samconfig.toml already holds the settings, and saving
would freeze every parameter into it), then "Deploy this changeset?" (y on AWS; N here: the
change set is what the rehearsal checks).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rehearsal.deploy import SAM_CONFIG, SAM_SETUP
from rehearsal.plan import functions
from rehearsal.stack import Stack
from rehearsal.toolchain import (
    DEV_PYTHON,
    REGION,
    REPOSITORY,
    SAM,
    RehearsalError,
    aws_environment,
    require,
)

GUIDED_STACK = "jobstream-guided"
TAIL_LINES = 30


@dataclass(frozen=True)
class GuidedAnswers:
    parameters: int
    unauthenticated_events: int

    def lines(self, stack: str, region: str, deploy: bool) -> list[str]:
        return [
            stack,
            region,
            *[""] * self.parameters,  # every parameter at its default
            "y",  # confirm changes before deploy
            "y",  # allow SAM CLI IAM role creation
            "n",  # disable rollback
            *["y"] * self.unauthenticated_events,  # authentication happens in the functions
            "n",  # save arguments to configuration file
            "y" if deploy else "n",  # deploy this changeset?
        ]


def guided_answers(document: dict[str, Any]) -> GuidedAnswers:
    events = [
        event
        for properties in functions(document).values()
        for event in (properties.get("Events") or {}).values()
        if event["Type"] == "HttpApi" and not (event.get("Properties") or {}).get("Auth")
    ]
    return GuidedAnswers(len(document.get("Parameters") or {}), len(events))


def guided_to_change_set(built: Path, answers: GuidedAnswers, endpoint: str, log: Path) -> str:
    """`sam deploy --guided` with `answers` piped in; the change set it made (then discarded)."""
    require(SAM, SAM_SETUP)
    text = "\n".join(answers.lines(GUIDED_STACK, REGION, deploy=False)) + "\n"
    command = [str(SAM), "deploy", "--guided", "--template-file", str(built / "template.yaml"),
               "--config-file", str(SAM_CONFIG)]  # fmt: skip
    result = subprocess.run(  # noqa: S603 - our own tools
        command, input=text, capture_output=True, text=True,
        env=aws_environment(endpoint), cwd=REPOSITORY, check=False,
    )  # fmt: skip
    log.write_text(result.stdout + result.stderr, encoding="utf-8")
    stack = Stack(GUIDED_STACK, endpoint)
    sets = stack.client("cloudformation").list_change_sets(StackName=GUIDED_STACK)["Summaries"]
    if result.returncode != 0 or not sets:
        tail = (result.stdout + result.stderr).splitlines()[-TAIL_LINES:]
        raise RehearsalError(
            "sam deploy --guided",
            f"exited {result.returncode}, {len(sets)} change set(s):\n" + "\n".join(tail),
        )
    stack.client("cloudformation").delete_stack(StackName=GUIDED_STACK)
    return str(sets[0]["ChangeSetName"])


def teardown(stack: Stack, log: Path) -> list[str]:
    """`python -m tools.teardown --stack NAME --yes` (what `make teardown` runs) with a file in
    the stack's bucket; returns the lines naming what stays."""
    bucket = next(
        physical
        for logical, physical in stack.physical_ids().items()
        if stack.processed_template()["Resources"][logical]["Type"] == "AWS::S3::Bucket"
    )
    stack.client("s3").put_object(Bucket=bucket, Key="jobs/rehearsal/file", Body=b"an asset")
    result = subprocess.run(  # noqa: S603 - our own tool
        [str(DEV_PYTHON), "-m", "tools.teardown", "--stack", stack.name, "--yes"],
        capture_output=True, text=True, env=aws_environment(stack.endpoint), cwd=REPOSITORY,
        check=False,
    )  # fmt: skip
    log.write_text(result.stdout + result.stderr, encoding="utf-8")
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).splitlines()[-TAIL_LINES:]
        raise RehearsalError("make teardown", f"exited {result.returncode}:\n" + "\n".join(tail))
    return [line for line in result.stdout.splitlines() if line.startswith("kept: ")]


def leftovers(stack: Stack, kept: list[str]) -> list[str]:
    """What of the stack still exists that the teardown did not name as kept."""
    prefix = f"{stack.name}-"
    found: list[str] = []
    found += [f["FunctionName"] for f in stack.client("lambda").list_functions()["Functions"]]
    found += [u.rsplit("/", 1)[-1] for u in stack.client("sqs").list_queues().get("QueueUrls", [])]
    found += [b["Name"] for b in stack.client("s3").list_buckets()["Buckets"]]
    found += stack.client("dynamodb").list_tables()["TableNames"]
    found += [r["RoleName"] for r in stack.client("iam").list_roles()["Roles"]]
    found += [g["logGroupName"] for g in stack.client("logs").describe_log_groups()["logGroups"]]
    found += [a["AlarmName"] for a in stack.client("cloudwatch").describe_alarms()["MetricAlarms"]]
    found += [s["ARN"] for s in stack.client("secretsmanager").list_secrets()["SecretList"]]
    ours = [name for name in found if prefix in name or name.startswith(prefix.lower())]
    return [name for name in ours if not any(name in line for line in kept)]
