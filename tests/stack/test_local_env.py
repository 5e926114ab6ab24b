"""Black-box: the file a running stack leaves for `jobstream --local` (issues 22 and 23).

Two stacks, one after the other on two ports: each has its own file, `--local` reaches the one
JOBSTREAM_PORT names (the only one, when one runs), and the second stopping leaves the first's
file alone. The file is its owner's only and holds nothing of the developer's AWS environment.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from jobstream_cli.app import app
from jobstream_local import local_env
from jobstream_local.child import ChildStack, child_environment, start_child
from tests.support.local_env import local_env_dir

pytestmark = pytest.mark.stack

# What a developer's shell may hold: none of it may reach the file (or moto).
DEVELOPER_AWS = {
    "AWS_ACCESS_KEY_ID": "AKIAREALDEVELOPERKEY1",
    "AWS_SECRET_ACCESS_KEY": "real-developer-secret-access-key",
    "AWS_SESSION_TOKEN": "real-developer-session-token",
    "AWS_PROFILE": "production",
    "AWS_REGION": "eu-west-3",
    "AWS_DEFAULT_REGION": "eu-west-3",
}
DEVELOPER_SECRETS = {"JOBSTREAM_PIXIV_REFRESH_TOKEN": "real-pixiv-refresh-token"}


def local(port: int | None, *args: str) -> Result:
    """`jobstream --local …` in this process, JOBSTREAM_PORT set to `port` (None: unset)."""
    if port is None:
        os.environ.pop("JOBSTREAM_PORT", None)
    else:
        os.environ["JOBSTREAM_PORT"] = str(port)
    return CliRunner().invoke(app, ["--local", "--output", "json", *args])


def operator_command(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`jobstream --local …` as a command, finding the stack through the local-env folder."""
    env = child_environment(JOBSTREAM_LOCAL_ENV_DIR=str(folder))
    env.pop("JOBSTREAM_PORT")
    command = [sys.executable, "-m", "jobstream_cli", "--local", "--output", "json", *args]
    return subprocess.run(  # noqa: S603 - our own interpreter and CLI
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def port_of(child: ChildStack) -> int:
    return int(child.url.rsplit(":", 1)[1])


@contextmanager
def running(folder: Path, **extra: str) -> Iterator[ChildStack]:
    child = start_child(child_environment(JOBSTREAM_LOCAL_ENV_DIR=str(folder), **extra))
    try:
        yield child
    finally:
        child.stop()


def submitted(port: int, key: str) -> str:
    result = local(port, "submit", "--target-id", "demo-illustration", "--key", key, "--no-follow")
    assert result.exit_code == 0, result.output
    job_id: str = json.loads(result.stdout)["job_id"]
    return job_id


def listed(port: int | None) -> list[str]:
    result = local(port, "jobs", "list")
    assert result.exit_code == 0, result.output
    return [job["job_id"] for job in json.loads(result.stdout)["jobs"]]


def check_private_and_clean(path: Path) -> dict[str, Any]:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text(encoding="utf-8")
    for value in (*DEVELOPER_AWS.values(), *DEVELOPER_SECRETS.values()):
        assert value not in text
    values: dict[str, Any] = json.loads(text)
    aws = {name: value for name, value in values.items() if name.startswith("AWS_")}
    endpoint = aws.pop("AWS_ENDPOINT_URL")
    assert endpoint.startswith("http://127.0.0.1:")  # its own moto
    assert aws == {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    return values


def test_two_stacks_and_local(tmp_path: Path) -> None:
    with local_env_dir(tmp_path) as folder, running(folder, **DEVELOPER_AWS) as first:
        one = port_of(first)
        first_file = local_env.file_for(folder, one)
        written = check_private_and_clean(first_file)
        assert written["JOBSTREAM_URL"] == first.url
        mine = submitted(one, "first")
        assert listed(None) == [mine]  # the only stack running
        with running(folder, **DEVELOPER_AWS, **DEVELOPER_SECRETS) as second:
            two = port_of(second)
            check_private_and_clean(local_env.file_for(folder, two))
            theirs = submitted(two, "second")
            assert (listed(one), listed(two)) == ([mine], [theirs])
            ambiguous = local(None, "jobs", "list")
            assert ambiguous.exit_code == 1
            assert f"2 local stacks are running (ports {min(one, two)}, {max(one, two)})" in (
                ambiguous.stderr
            )
            assert "JOBSTREAM_PORT" in ambiguous.stderr
        # The second stopped: the first's file is as it was, and --local finds it again.
        assert json.loads(first_file.read_text(encoding="utf-8")) == written
        assert local_env.running(folder) == {one: first_file}
        assert listed(None) == [mine]
        # Operator commands act on that stack too (its table and queues, its moto): in a process
        # of their own, as a developer runs them (here, a suite's in-process moto may be active).
        sweep = operator_command(folder, "sweep")
        assert (sweep.returncode, json.loads(sweep.stdout)["errors"]) == (0, 0), sweep.stderr
    assert not first_file.exists()
    with local_env_dir(tmp_path):
        gone = local(None, "jobs", "list")
    assert (gone.exit_code, "no local stack is running" in gone.stderr) == (1, True)
