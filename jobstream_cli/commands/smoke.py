"""`smoke`: one job end to end through any deployment, step by step, saying which step failed.

    capabilities → submit → replay → follow → page → ack → cancel (a second job)

Each step checks what the protocol promises at that point; the first that fails stops the run
with exit code 1 and one line naming the step and why.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Annotated, Any, Final

import typer
from rich.text import Text

from jobstream_cli import follow
from jobstream_cli.client import ApiClient, ApiError
from jobstream_cli.errors import CliError
from jobstream_cli.state import Cli, current

JOB_TYPE: Final = "candidate_search"
DEFAULT_TIMEOUT_S: Final = 120.0


class StepFailed(Exception):  # noqa: N818 - a step's verdict, not a crash
    """The step ran and the deployment's answer was not what the protocol promises."""


@dataclass
class Run:
    """What the steps share: the client, the Tasks' options, and what earlier steps found."""

    client: ApiClient
    target_id: str | None
    cancel_target_id: str | None
    timeout_s: float
    key: str = field(default_factory=lambda: f"smoke-{uuid.uuid4()}")
    job_id: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)

    def task(self, key: str, target_id: str | None) -> dict[str, Any]:
        params = {"target_id": target_id} if target_id else {}
        return {
            "protocol_version": "1",
            "job_type": JOB_TYPE,
            "idempotency_key": key,
            "correlation_id": "jobstream-smoke",
            "params": params,
        }


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise StepFailed(message)


def capabilities(run: Run) -> str:
    document = run.client.capabilities()
    _check("1" in (document.get("protocol_versions") or []), "protocol version 1 is not offered")
    names = [item.get("name") for item in document.get("job_types") or []]
    _check(JOB_TYPE in names, f"job type {JOB_TYPE} is not offered (got {names})")
    return "protocol 1, candidate_search"


def submit(run: Run) -> str:
    try:
        answer = run.client.submit(run.task(run.key, run.target_id))
    except ApiError as error:
        if error.status == HTTPStatus.CONFLICT and run.target_id is None:
            raise StepFailed(f"{error} - name the target to run with --target-id") from None
        raise
    _check(not answer.replayed, f"a fresh key {run.key!r} was answered as a replay (HTTP 200)")
    run.job_id = str(answer.job.get("job_id") or "")
    _check(bool(run.job_id), "the answer has no job_id")
    return f"{run.job_id} (HTTP 202, {answer.job.get('status')})"


def replay(run: Run) -> str:
    answer = run.client.submit(run.task(run.key, run.target_id))
    _check(answer.replayed, "the same Task again was not answered as a replay (HTTP 200)")
    _check(answer.job.get("job_id") == run.job_id, "the replay names another job")
    return "HTTP 200, the same job"


def follow_job(run: Run) -> str:
    deadline = time.monotonic() + run.timeout_s
    seen: list[dict[str, Any]] = []

    def waited(_seconds: float) -> None:
        if time.monotonic() > deadline:
            status = run.client.get_job(run.job_id).get("status")
            raise StepFailed(f"no terminal event within {run.timeout_s:g} s (job {status})")
        follow.pause(_seconds)

    finished = follow.stream_events(
        run.client, run.job_id, lambda event, _newest: seen.append(event), follow=True, sleep=waited
    )
    _check(finished, "the stream ended without a terminal event")
    last = seen[-1]
    if last.get("type") != "job.succeeded":
        error = (last.get("payload") or {}).get("error") or {}
        raise StepFailed(
            f"the job ended {last.get('type')} ({error.get('code')}: {error.get('message')})"
        )
    candidates = ((last.get("payload") or {}).get("result") or {}).get("candidates") or []
    return f"{len(seen)} events, job.succeeded with {len(candidates)} candidate(s)"


def page(run: Run) -> str:
    document = run.client.events(run.job_id, unacked=True)
    run.events = document.get("events") or []
    types = [event.get("type") for event in run.events]
    _check(bool(types) and types[0] == "job.accepted", f"the page starts with {types[:1]}")
    _check(types[-1] == "job.succeeded", f"the page ends with {types[-1:]}")
    _check(
        document.get("unacked") == len(run.events),
        f"unacked is {document.get('unacked')}, the page holds {len(run.events)} events",
    )
    job = run.client.get_job(run.job_id)
    _check(job.get("status") == "succeeded", f"GET /jobs/{{id}} says {job.get('status')}")
    _check(job.get("result") is not None, "the succeeded job has no result")
    return f"{len(run.events)} unacked events; the job is succeeded with its result"


def ack(run: Run) -> str:
    through = str(run.events[-1].get("event_id"))
    result = run.client.ack(run.job_id, through)
    _check(
        (result.get("acked"), result.get("unacked")) == (len(run.events), 0),
        f"acked {result.get('acked')}, unacked {result.get('unacked')} "
        f"(expected {len(run.events)}, 0)",
    )
    return f"acked {len(run.events)} through {through}, 0 unacked"


def cancel(run: Run) -> str:
    target = run.cancel_target_id or run.target_id
    answer = run.client.submit(run.task(f"{run.key}-cancel", target))
    job_id = str(answer.job.get("job_id"))
    job = run.client.cancel(job_id)
    if job.get("status") != "cancelled":
        raise StepFailed(
            f"{job_id} ended {job.get('status')} before the cancel reached it: "
            "give --cancel-target-id a slower target (the shipped demo-slow)"
        )
    types = [event.get("type") for event in run.client.events(job_id).get("events") or []]
    _check(types[-1:] == ["job.cancelled"], f"the stream ends with {types[-1:]}, not cancelled")
    return f"{job_id} cancelled while active; its stream ends with job.cancelled"


STEPS: Final[tuple[tuple[str, Callable[[Run], str]], ...]] = (
    ("capabilities", capabilities),
    ("submit", submit),
    ("replay", replay),
    ("follow", follow_job),
    ("page", page),
    ("ack", ack),
    ("cancel", cancel),
)


def run_steps(state: Cli, run: Run) -> list[dict[str, Any]]:
    """Every step in order until one fails; the report of each that ran."""
    report: list[dict[str, Any]] = []
    for name, step in STEPS:
        started = time.monotonic()
        try:
            detail, ok = step(run), True
        except (StepFailed, CliError) as error:
            detail, ok = str(error), False
        ms = round((time.monotonic() - started) * 1000)
        report.append({"step": name, "ok": ok, "detail": detail, "ms": ms})
        if not state.json:
            line = Text("ok    " if ok else "FAIL  ", style="green" if ok else "bold red")
            line.append(f"{name:<13}", style="bold")
            line.append(f"{detail}  ")
            line.append(f"{ms} ms", style="dim")
            state.out.print(line)
        if not ok:
            break
    return report


def smoke(
    ctx: typer.Context,
    target_id: Annotated[
        str | None,
        typer.Option(help="the target to run (default: the deployment's one enabled target)"),
    ] = None,
    cancel_target_id: Annotated[
        str | None,
        typer.Option(help="the target of the job to cancel, slow enough to be caught active"),
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=1, help="seconds the first job may take to finish")
    ] = DEFAULT_TIMEOUT_S,
) -> None:
    """Run one job end to end (submit, replay, follow, page, ack) and cancel a second one;
    exit 1 naming the first step that failed."""
    state = current(ctx)
    run = Run(state.client(), target_id, cancel_target_id, timeout)
    report = run_steps(state, run)
    failed = next((step for step in report if not step["ok"]), None)
    if state.json:
        state.emit_json({"ok": failed is None, "url": state.url, "steps": report})
    if failed is not None:
        raise CliError(f"smoke test failed at step {failed['step']}: {failed['detail']}")
    if not state.json:
        state.out.print(Text(f"smoke test passed against {state.url}", style="bold green"))
