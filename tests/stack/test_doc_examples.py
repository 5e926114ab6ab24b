"""Every command docs/*.md shows for the local stack runs as written against `make run` and its
shipped targets (layers/jobstream/jobstream/config/targets.default.json), as
tests/stack/test_readme.py does for the README: each `sh` block, one bash per block (its
variables carried from command to command). A block written for an AWS deployment says so
below, with the reason; a new block is run unless it is listed there. Only the base URL
changes: the stack listens on a free port. (Inline commands in the prose are for the situation
the sentence describes, not to be run in turn.)
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.stack.test_readme import (
    README_URL,
    Ran,
    Stack,
    bare,
    commands,
    run_block,
    sh_blocks,
    stack,  # noqa: F401 - the fixture: `make run`, as the README says, on a free port
)
from tests.support.stack import REPOSITORY

pytestmark = pytest.mark.stack

DOCS = REPOSITORY / "docs"
# Whole pages written for an AWS account.
AWS_PAGES = {"deploy.md": "a first deployment to a real AWS account, step by step"}
# Blocks written for something else than the local stack, by page and first command.
NOT_LOCAL = {
    ("operations.md", "export JOBSTREAM_TENANTS_SECRET="): "edits a deployed registry secret",
    ("operations.md", "python -m jobstream_cli dead-letters list"): (
        "the operator CLI against a deployment's table and queues (the environment it says)"
    ),
    ("load.md", ".venv/bin/python -m bench.load"): "the load test: minutes, `make load` runs it",
    ("operations.md", "jobstream tenants endpoints"): (
        "a reference of the two endpoint commands: TENANT and ORIGIN name a real tenant's"
        " (tests/integration/test_endpoint_health.py runs both)"
    ),
}


def _events(output: str) -> list[dict[str, Any]]:
    """The JSON events among a command's lines (piped, the CLI prints JSON)."""
    found = []
    for line in output.splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if isinstance(document, dict) and "event_id" in document:
            found.append(document)
    return found


def _fetched(events: list[dict[str, Any]]) -> bool:
    last = events[-1]
    assets = last["payload"]["result"]["assets"]
    return last["type"] == "job.succeeded" and len(assets) == 2


def _fetched_job(output: str) -> bool:
    job = json.loads(output)
    return job["status"] == "succeeded" and len(job["result"]["assets"]) == 2


# What a command prints, by a piece of the command that names it once in the docs.
CHECKS: dict[str, Callable[[str], bool]] = {
    "--param 'work_id=": lambda out: _fetched(_events(out)),
    "$B/jobs -d": lambda out: out.rstrip().endswith(" HTTP 202"),
    "events $JOB --follow": lambda out: [e["type"] for e in _events(out)][-1] == "job.succeeded",
    "$B/jobs/$JOB": _fetched_job,
}


def _key(page: str, block: str) -> tuple[str, str] | None:
    first = bare(commands(block)[0])
    return next((key for key in NOT_LOCAL if key[0] == page and first.startswith(key[1])), None)


def local_blocks() -> list[tuple[str, str]]:
    """Every (page, block) of docs/*.md to run against the local stack."""
    return [
        (path.name, block)
        for path in sorted(DOCS.glob("*.md"))
        if path.name not in AWS_PAGES
        for block in sh_blocks(path.read_text(encoding="utf-8"))
        if _key(path.name, block) is None
    ]


def test_every_block_not_run_says_why_and_still_exists() -> None:
    listed = {
        key
        for path in sorted(DOCS.glob("*.md"))
        for block in sh_blocks(path.read_text(encoding="utf-8"))
        if (key := _key(path.name, block)) is not None
    }
    assert listed == set(NOT_LOCAL)
    for page in AWS_PAGES:
        assert (DOCS / page).exists(), page
    # job-types.md's examples at least: the docs hold commands to run.
    assert {page for page, _ in local_blocks()} >= {"job-types.md"}


def _run(running: Stack, block_commands: list[str]) -> list[Ran]:
    # A page may say `jobstream` where the README says `.venv/bin/jobstream`: both resolve here.
    path = f"{REPOSITORY / '.venv' / 'bin'}{os.pathsep}{running.env['PATH']}"
    return run_block(
        [c.replace(README_URL, running.url) for c in block_commands], {**running.env, "PATH": path}
    )


def test_every_local_command_of_the_docs_runs_as_written(stack: Stack) -> None:  # noqa: F811
    checked = set()
    for page, block in local_blocks():
        for item in _run(stack, commands(block)):
            assert item.status == 0, (page, item.command, item.output)
            for piece, check in CHECKS.items():
                if piece in item.command:
                    assert check(item.output), (page, item.command, item.output)
                    checked.add(piece)
    assert checked == set(CHECKS)  # every check found its command


def test_conformance_without_params_calls_the_shipped_stack_conformant(
    stack: Stack,  # noqa: F811
) -> None:
    """Both shipped targets are enabled: a Task naming none is refused (409), which the kit
    without --params must not hold against the producer."""
    result = subprocess.run(  # noqa: S603 - our own CLI
        [".venv/bin/jobstream", "--url", stack.url, "--token", "local-dev-token", "-o", "table",
         "conformance", "--timeout", "30"],
        cwd=REPOSITORY, env={**stack.env, "COLUMNS": "200"}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "NOT CONFORMANT" not in result.stdout
    last = result.stdout.splitlines()[-1]
    assert "were not observed" in last
    assert "--params" in last
