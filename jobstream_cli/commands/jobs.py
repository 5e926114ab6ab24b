"""`jobs list` and `jobs show`: the consumer's view of its jobs."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.text import Text

from jobstream_cli.render import job_detail, jobs_view, now_ms
from jobstream_cli.state import Cli, current
from jobstream_client import Job

app = typer.Typer(help="List and inspect jobs (HTTP API).", no_args_is_help=True)


class Status(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    expired = "expired"


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    status: Annotated[Status | None, typer.Option(help="only jobs in this state")] = None,
    correlation_id: Annotated[str | None, typer.Option(help="only this correlation id")] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, max=500, help="at most this many (server default 100)")
    ] = None,
) -> None:
    """The tenant's jobs, newest first, as a table."""
    state = current(ctx)
    client = state.client()
    filters = {"status": status.value if status else None, "correlation_id": correlation_id}
    page = client.list_page(**filters, limit=limit)
    # A request reads a bounded part of the index: a rare status may first answer empty pages
    # that say more may follow. Follow them to the first jobs, or to the end.
    while not page.jobs and page.next_cursor:
        page = client.list_page(**filters, limit=limit, cursor=page.next_cursor)
    if state.json:
        state.emit_json(page.raw)
        return
    if not page.jobs:
        state.out.print("no jobs")
        return
    state.out.print(jobs_view([job.raw for job in page.jobs], now_ms(), state.out.width))
    if page.next_cursor:
        state.out.print(f"[dim]more jobs exist (showing {len(page.jobs)}; raise --limit)[/dim]")


@app.command("show")
def show(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="the job to show")],
) -> None:
    """One job: state, timings, lease, attempt, progress, and its result or error."""
    state = current(ctx)
    print_job(state, state.client().get(job_id))


def print_job(state: Cli, job: Job, heading: Text | None = None) -> None:
    """The job as the API sent it (JSON), or its heading (if any) and its detail."""
    if state.json:
        state.emit_json(job.raw)
        return
    if heading is not None:
        state.out.print(heading)
    state.out.print(job_detail(job.raw, now_ms()))
