"""`events JOB_ID [--follow]`: a job's event stream, as it comes."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Annotated, Any

import typer

from jobstream_cli import follow
from jobstream_cli.render import event_line
from jobstream_cli.state import Cli, current


def print_events(state: Cli, job_id: str, *, follow_stream: bool) -> None:
    """Print the job's events; when following, until its terminal event (Ctrl-C stops)."""

    client = state.client()

    def show(event: dict[str, Any], newest: bool) -> None:
        if state.json:
            state.emit_json(event, line=True)
            return
        progress = None
        if follow_stream and newest and event.get("type") == "job.progress":
            # The event says that the job progressed; what it is doing now is on the job, while
            # it still runs (a job that ended since the page was read says how it ended instead).
            job = client.get_job(job_id)
            progress = job.get("progress") if job.get("status") == "running" else None
        state.out.print(event_line(event, progress))

    def waiting() -> AbstractContextManager[object]:
        # A spinner only where someone watches; pipes get the events alone.
        if follow_stream and not state.json and state.out.is_terminal:
            return state.out.status(f"following {job_id} (Ctrl-C to stop)", spinner="dots")
        return nullcontext()

    follow.stream_events(client, job_id, show, follow=follow_stream, waiting=waiting)


def events(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="the job whose events to print")],
    follow_stream: Annotated[
        bool,
        typer.Option("--follow", "-f", help="poll every second until a terminal event arrives"),
    ] = False,
) -> None:
    """Print a job's events; with --follow, keep polling until it finishes."""
    print_events(current(ctx), job_id, follow_stream=follow_stream)
