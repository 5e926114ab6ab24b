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

    def show(event: Event) -> None:
        if state.json:
            state.emit_json(event.raw, line=True)
        else:
            state.out.print(event_line(event.raw))

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
            for event in page.events:
                show(event)


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
