"""The README's commands, run as written against a stack started by `make run`.

Every command of every `sh` block in README.md runs (in one bash per block, so the variables a
block sets carry to its next commands), except `make test`, the suite this test is part of, and
`make run`, which starts the stack they run against. Only the base URL changes: the stack
listens on a free port. Each command must exit 0, and what it prints must be what the README
says it prints.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.stack import REPOSITORY
from tests.support.stack import environment as stack_environment

pytestmark = pytest.mark.stack

README = REPOSITORY / "README.md"
README_URL = "http://127.0.0.1:3000"
STARTS_THE_STACK = "make run"
NOT_RUN = {
    "make test": "the suite this test belongs to (it would run itself)",
    "make rehearse": "a deployment to an emulator of its own (minutes), a target of its own",
}
SWEEP_INTERVAL_S = 0.5


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def commands(block: str) -> list[str]:
    """The block's commands: a line, or several while a quote is open; comment lines dropped."""
    found: list[str] = []
    pending = ""
    for line in block.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        found.append(pending)
        pending = ""
    assert not pending, f"unterminated command in README: {pending}"
    return found


def bare(command: str) -> str:
    """The command without its trailing comment, for the lists above."""
    return " ".join(shlex.split(command, comments=True))


@dataclass
class Ran:
    command: str
    status: int
    output: str


MARK = "@@readme-command@@"


def run_block(block_commands: list[str], env: dict[str, str]) -> list[Ran]:
    """Run the commands in one bash, in order; the status and output of each."""
    script = []
    for index, command in enumerate(block_commands):
        # On a line of its own: a command's output need not end with a newline (curl's does not).
        script += [command, f"printf '\\n{MARK} {index} %d\\n' $?"]
    completed = subprocess.run(  # noqa: S603 - the README's own commands, which is the point
        ["/bin/bash", "-c", "\n".join(script)],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    ran: list[Ran] = []
    output = ""
    for line in completed.stdout.splitlines(keepends=True):
        if line.startswith(MARK):
            _, index, status = line.split()
            ran.append(Ran(block_commands[int(index)], int(status), output))
            output = ""
        else:
            output += line
    assert len(ran) == len(block_commands), completed.stderr
    return ran


@dataclass
class Stack:
    url: str
    env: dict[str, str]
    stderr: list[str]
    # What it logged while idle, right after it became ready (before any test spoke to it).
    idle_log: list[str]
    # Its ready line and the line after it.
    ready: str


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """`make run`, exactly as the README says, on a free port and with a fast sweep."""
    env = stack_environment(JOBSTREAM_SWEEP_INTERVAL_S=str(SWEEP_INTERVAL_S))
    process = subprocess.Popen(  # noqa: S603 - make, as the README says
        [shutil.which("make") or "make", "--no-print-directory", *STARTS_THE_STACK.split()[1:]],
        cwd=REPOSITORY,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C reaches make and the stack, as in a terminal
    )
    assert process.stdout is not None
    assert process.stderr is not None
    stderr: list[str] = []
    threading.Thread(target=stderr.extend, args=(process.stderr,), daemon=True).start()
    url = ready = ""
    deadline = time.monotonic() + 120
    while not url and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if "ready" in line:
            assert "in memory" in line  # the user is told before they lose anything
            url = next(word for word in line.split() if word.startswith("http://"))
            ready = line + process.stdout.readline()  # and what to try first
    threading.Thread(target=process.stdout.read, daemon=True).start()
    try:
        assert url, "make run did not become ready:\n" + "".join(stderr)
        time.sleep(4 * SWEEP_INTERVAL_S)  # several sweeps run meanwhile
        yield Stack(url, env, stderr, idle_log=list(stderr), ready=ready)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _json(output: str) -> Any:
    return json.loads(output)


def _http(output: str) -> tuple[Any, int]:
    """curl -w ' HTTP %{http_code}': the body and the status."""
    body, _, status = output.rstrip("\n").rpartition(" HTTP ")
    return json.loads(body), int(status)


def _types(output: str) -> list[str]:
    """The types of the events among the output's lines (a command run alongside, like the
    background cancel of the tour, may print its own lines in between)."""
    types = []
    for line in output.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event_id" in event:
            types.append(event["type"])
    return types


def _check_submitted(outputs: list[str]) -> None:
    (new, new_status), (replay, replay_status), (conflict, conflict_status) = map(_http, outputs)
    assert (new_status, replay_status, conflict_status) == (202, 200, 409)
    assert new["job"]["status"] in {"queued", "running"}
    assert replay["job"]["job_id"] == new["job"]["job_id"]
    assert conflict["error"]["code"] == "idempotency_conflict"


def _check_cancel_then_ack(page: str, ack: str) -> None:
    events = _json(page)["events"]
    assert [events[0]["type"], events[-1]["type"]] == ["job.accepted", "job.cancelled"]
    result = _json(ack)
    assert result["acked"] == len(events) > 0
    assert result["unacked"] == 0


# What each command prints (by a piece of the command that names it once in the README).
CURL_TOUR: dict[str, Callable[[str], None]] = {
    "/capabilities": lambda out: _json(out)["protocol_versions"],
    "# also: correlation_id": lambda out: _json(out)["jobs"][0]["job_id"],
    "$B/jobs/$JOB ": lambda out: _json(out)["status"] in {"queued", "running"},
    "/cancel": lambda out: _json(out)["status"] == "cancelled",
}
CLI_TOUR: dict[str, Callable[[str], None]] = {
    "--version": lambda out: out.startswith("jobstream "),
    "follows its events to the end": lambda out: _types(out)[-1] == "job.succeeded",
    "jobs list": lambda out: len(_json(out)["jobs"]) >= 3,
    "jobs show $SLOW": lambda out: _json(out)["status"] in {"queued", "running"},
    "ack $SLOW": lambda out: _json(out)["unacked"] == 0 < _json(out)["acked"],
    "dlq list": lambda out: _json(out)[0]["last_status"] == 401,
    "dlq redrive": lambda out: (
        (_json(out)["how"], _json(out)["revived"] > 0) == ("move-task", True)
    ),
    "sweep": lambda out: _json(out)["errors"] == 0,
    "smoke": lambda out: _json(out)["ok"] is True,
}


def _only(ran: list[Ran], piece: str) -> Ran:
    (found,) = [item for item in ran if piece in item.command]
    return found


def test_an_idle_stack_is_quiet(stack: Stack) -> None:
    # Four sweeps ran with nothing to do: they said nothing (they used to log two long lines each).
    assert stack.idle_log == []


def test_every_readme_command_runs_as_written(stack: Stack) -> None:
    blocks = sh_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == 4  # the quick start, the curl tour, the CLI tour, the tenants
    quick_start, curl_tour, cli_tour, _tenants = ([*map(bare, commands(b))] for b in blocks)
    assert quick_start == [STARTS_THE_STACK, *NOT_RUN]
    env = stack.env

    ran = run_block([c.replace(README_URL, stack.url) for c in commands(blocks[1])], env)
    assert len(ran) == len(curl_tour)
    for item in ran:
        assert item.status == 0, (item.command, item.output)
    for piece, check in CURL_TOUR.items():
        assert check(_only(ran, piece).output), piece
    submits = [item.output for item in ran if "$B/jobs -d" in item.command]
    _check_submitted(submits)
    _check_cancel_then_ack(_only(ran, "events?unacked=1").output, _only(ran, "ack_through").output)

    ran = run_block(commands(blocks[2]), env)
    assert len(ran) == len(cli_tour)
    for item in ran:
        assert item.status == 0, (item.command, item.output)
    for piece, check in CLI_TOUR.items():
        assert check(_only(ran, piece).output), piece
    first, again = (item.output for item in ran if "--key tour-cli" in item.command)
    assert _json(first)["job_id"] == _json(again)["job_id"]
    followed = _only(ran, "events $SLOW --follow").output
    types = _types(followed)
    assert types[:2] == ["job.accepted", "job.started"]
    assert "job.progress" in types
    assert types[-1] == "job.cancelled"
    # Nothing went wrong inside the stack either: no traceback, from the redrive or elsewhere.
    assert "Traceback" not in "".join(stack.stderr)


def test_the_readme_tenants_block_runs_as_written(stack: Stack) -> None:
    (block,) = [b for b in sh_blocks(README.read_text(encoding="utf-8")) if "tenants add" in b]
    ran = run_block(commands(block), stack.env)
    for item in ran:
        assert item.status == 0, (item.command, item.output)
    added = _json(_only(ran, "tenants add").output)
    rotated = _json(_only(ran, "rotate-token").output)
    assert added["api_token"].startswith("jst_")
    assert rotated["api_token"].startswith("jst_")
    assert rotated["api_token"] != added["api_token"]
    (acme,) = _json(_only(ran, "tenants list").output)
    assert acme["tenant"] == "acme"
    assert [token["in_force"] for token in acme["api_tokens"]] == [True, True]  # the overlap
    assert acme["callback_origins"] == ["http://127.0.0.1:*"]
    # Shown once: the list names what is in force, never a value.
    listed = _only(ran, "tenants list").output
    assert added["api_token"] not in listed
    assert rotated["api_token"] not in listed


def test_the_ready_lines_token_works(stack: Stack) -> None:
    # What `make run` prints to try first: its token is the stack's own.
    (curl,) = re.findall(r"try: (curl .*)$", stack.ready, flags=re.MULTILINE)
    result = subprocess.run(  # noqa: S603 - the command the stack printed
        [*shlex.split(curl), "-s", "-o", "/dev/null", "-w", "%{http_code}"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.stdout == "200", (curl, result.stdout, result.stderr)


def test_smoke_through_url_and_token(stack: Stack) -> None:
    # As against a deployment: no --local, the URL and a token.
    result = subprocess.run(  # noqa: S603 - our own CLI
        [".venv/bin/jobstream", "--url", stack.url, "--token", "local-dev-token", "-o", "table",
         "smoke", "--target-id", "demo-illustration", "--cancel-target-id", "demo-slow"],
        cwd=REPOSITORY, env={**stack.env, "COLUMNS": "200"}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    steps = [line.split()[:2] for line in result.stdout.splitlines()[:-1]]
    assert steps == [
        ["ok", name]
        for name in ("capabilities", "submit", "replay", "follow", "page", "ack", "cancel")
    ]
    assert result.stdout.splitlines()[-1] == f"smoke test passed against {stack.url}"
