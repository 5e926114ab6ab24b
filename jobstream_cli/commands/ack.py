"""`ack JOB_ID [EVENT_ID]`: acknowledge a job's events through one of them."""

from __future__ import annotations

from typing import Annotated

import typer

from jobstream_cli.errors import CliError
from jobstream_cli.state import current


def ack(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="the job whose events to acknowledge")],
    event_id: Annotated[
        str | None,
        typer.Argument(help="acknowledge through this event (default: the newest one now)"),
    ] = None,
) -> None:
    """Acknowledge a job's events through EVENT_ID (default: its newest event).

    The ack cursor only moves forward: acknowledging an older event changes nothing.
    """
    state = current(ctx)
    client = state.client()
    # The API answers an id it does not know with 200 and nothing acked: checked here instead.
    known = [event.event_id for event in client.events(job_id)]
    if not known:
        raise CliError(f"{job_id} has no events to acknowledge")
    if event_id is not None and event_id not in known:
        raise CliError(f"{event_id} is not an event of {job_id} (see `jobstream events {job_id}`)")
    through = event_id or known[-1]
    result = client.ack(job_id, through)
    if state.json:
        state.emit_json(result.raw)
        return
    state.out.print(f"acked through {through}: {result.acked} acked, {result.unacked} unacked")
