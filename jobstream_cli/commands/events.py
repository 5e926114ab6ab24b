"""`events JOB_ID [--follow]`: a job's event stream, as it comes."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Annotated

import typer

from jobstream_cli import api
from jobstream_cli.render import event_line
from jobstream_cli.state import Cli, current
from jobstream_client import Event


def print_events(state: Cli, job_id: str, *, follow_stream: bool) -> None:
    """Print the job's events; when following, until its terminal event (Ctrl-C stops)."""

    client = state.client()

    def show(event: Event, *, newest: bool = False) -> None:
        if state.json:
            state.emit_json(event.raw, line=True)
            return
        progress = None
        if follow_stream and newest and event.type == "job.progress":
            # The event says that the job progressed; what it is doing now is on the job, while
            # it still runs (a job that ended since the page was read says how it ended instead).
            job = client.get(job_id)
            progress = job.raw.get("progress") if job.status == "running" else None
        state.out.print(event_line(event.raw, progress))

    if not follow_stream:
        for event in client.events(job_id):
            show(event)
        return
    # A spinner only where someone watches; pipes get the events alone.
    waiting: AbstractContextManager[object] = (
        state.out.status(f"following {job_id} (Ctrl-C to stop)", spinner="dots")
        if not state.json and state.out.is_terminal
        else nullcontext()
    )
    with waiting:
        # The CLI acks nothing (`ack` does): it reads the stream from the start.
        pages = client.follow_pages(job_id, ack=False, poll_interval_s=api.POLL_INTERVAL_S)
        for page in pages:
            for position, event in enumerate(page.events, start=1):
                # The newest of the stream when its page was read: the job's progress is its.
                show(event, newest=page.next_after is None and position == len(page.events))


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
