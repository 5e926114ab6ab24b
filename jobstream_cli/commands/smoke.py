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
from typing import Annotated, Any, Final

import typer
from rich.text import Text

from jobstream_cli import api
from jobstream_cli.errors import CliError, explain
from jobstream_cli.state import Cli, current
from jobstream_client import Client, ConflictError, Event, FollowTimeoutError, JobstreamError

JOB_TYPE: Final = "candidate_search"
DEFAULT_TIMEOUT_S: Final = 120.0


class StepFailed(Exception):  # noqa: N818 - a step's verdict, not a crash
    """The step ran and the deployment's answer was not what the protocol promises."""


@dataclass
class Run:
    """What the steps share: the client, the Tasks' options, and what earlier steps found."""

    client: Client
    target_id: str | None
    cancel_target_id: str | None
    timeout_s: float
    key: str = field(default_factory=lambda: f"smoke-{uuid.uuid4()}")
    job_id: str = ""
    events: list[Event] = field(default_factory=list)

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
    offered = run.client.capabilities()
    _check("1" in offered.protocol_versions, "protocol version 1 is not offered")
    names = [declared.name for declared in offered.job_types]
    _check(JOB_TYPE in names, f"job type {JOB_TYPE} is not offered (got {names})")
    return "protocol 1, candidate_search"


def submit(run: Run) -> str:
    try:
        answer = run.client.submit(run.task(run.key, run.target_id))
    except ConflictError as error:
        if run.target_id is None:
            raise StepFailed(f"{error} - name the target to run with --target-id") from None
        raise
    # A replay after a retried attempt may be this run's own first attempt (its answer lost).
    _check(
        not answer.replayed or answer.attempts > 1,
        f"a fresh key {run.key!r} was answered as a replay (HTTP 200)",
    )
    run.job_id = answer.job.job_id
    return f"{run.job_id} (HTTP {200 if answer.replayed else 202}, {answer.job.status})"


def replay(run: Run) -> str:
    answer = run.client.submit(run.task(run.key, run.target_id))
    _check(answer.replayed, "the same Task again was not answered as a replay (HTTP 200)")
    _check(answer.job.job_id == run.job_id, "the replay names another job")
    return "HTTP 200, the same job"


def follow_job(run: Run) -> str:
    try:
        seen = list(
            run.client.follow(
                run.job_id, ack=False, poll_interval_s=api.POLL_INTERVAL_S, timeout_s=run.timeout_s
            )
        )
    except FollowTimeoutError:
        status = run.client.get(run.job_id).status
        raise StepFailed(f"no terminal event within {run.timeout_s:g} s (job {status})") from None
    _check(bool(seen) and seen[-1].terminal, "the stream ended without a terminal event")
    last = seen[-1]
    if last.type != "job.succeeded":
        error = last.payload.get("error") or {}
        raise StepFailed(f"the job ended {last.type} ({error.get('code')}: {error.get('message')})")
    candidates = (last.result or {}).get("candidates") or []
    return f"{len(seen)} events, job.succeeded with {len(candidates)} candidate(s)"


def page(run: Run) -> str:
    document = run.client.events_page(run.job_id, unacked=True)
    run.events = list(document.events)
    types = [event.type for event in run.events]
    _check(bool(types) and types[0] == "job.accepted", f"the page starts with {types[:1]}")
    _check(types[-1] == "job.succeeded", f"the page ends with {types[-1:]}")
    _check(
        document.unacked == len(run.events),
        f"unacked is {document.unacked}, the page holds {len(run.events)} events",
    )
    job = run.client.get(run.job_id)
    _check(job.status == "succeeded", f"GET /jobs/{{id}} says {job.status}")
    _check(job.result is not None, "the succeeded job has no result")
    return f"{len(run.events)} unacked events; the job is succeeded with its result"


def ack(run: Run) -> str:
    through = run.events[-1].event_id
    result = run.client.ack(run.job_id, through)
    _check(
        (result.acked, result.unacked) == (len(run.events), 0),
        f"acked {result.acked}, unacked {result.unacked} (expected {len(run.events)}, 0)",
    )
    return f"acked {len(run.events)} through {through}, 0 unacked"


def cancel(run: Run) -> str:
    target = run.cancel_target_id or run.target_id
    job_id = run.client.submit(run.task(f"{run.key}-cancel", target)).job.job_id
    job = run.client.cancel(job_id)
    if job.status != "cancelled":
        raise StepFailed(
            f"{job_id} ended {job.status} before the cancel reached it: "
            "give --cancel-target-id a slower target (the shipped demo-slow)"
        )
    types = [event.type for event in run.client.events(job_id)]
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
        except JobstreamError as error:
            detail, ok = explain(error, local=state.local), False
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
