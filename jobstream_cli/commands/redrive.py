"""`dead-callbacks` and `redrive [--job JOB_ID | --since MS]`: the caller's own dead letters."""

from __future__ import annotations

from typing import Annotated

import typer

from jobstream_cli.state import current


def dead_callbacks(ctx: typer.Context) -> None:
    """List your dead callbacks (their attempts spent), oldest death first."""
    state = current(ctx)
    found = 0
    for job_id, delivery in state.client().dead_letters():
        found += 1
        if state.json:
            state.emit_json(delivery.raw, line=True)
            continue
        state.out.print(
            f"{job_id}  {delivery.type:<16} {delivery.attempts} attempts  "
            f"last {delivery.last_status}  {delivery.last_error or ''}".rstrip()
        )
    if not found and not state.json:
        state.out.print("no dead callbacks")


def redrive(
    ctx: typer.Context,
    job_id: Annotated[
        str | None, typer.Option("--job", help="only this job's dead callbacks")
    ] = None,
    since: Annotated[
        int | None, typer.Option("--since", help="only those dead since this time (epoch ms)")
    ] = None,
) -> None:
    """Send your dead callbacks again, each with a fresh budget of attempts."""
    state = current(ctx)
    if job_id is not None and since is not None:
        raise typer.BadParameter("give --job or --since, not both")
    revived = state.client().redrive(job_id=job_id, since=since)
    if state.json:
        state.emit_json({"revived": revived})
        return
    state.out.print(f"{revived} dead callbacks sent again")
