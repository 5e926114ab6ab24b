"""`callbacks JOB_ID`: how each callback of a job was delivered."""

from __future__ import annotations

from typing import Annotated

import typer

from jobstream_cli.state import current


def callbacks(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="the job whose callbacks to show")],
) -> None:
    """Show each callback of a job: its event, state, attempts and the receiver's last answer."""
    state = current(ctx)
    deliveries = state.client().callbacks(job_id)
    if state.json:
        for delivery in deliveries:
            state.emit_json(delivery.raw, line=True)
        return
    if not deliveries:
        state.out.print(f"{job_id} has no callbacks (no callback_url)")
        return
    for delivery in deliveries:
        answer = f"last {delivery.last_status}" if delivery.last_status is not None else ""
        error = f"  {delivery.last_error}" if delivery.last_error else ""
        state.out.print(
            f"{delivery.type:<16} {delivery.state:<10} "
            f"{delivery.attempts}/{delivery.max_attempts} attempts  {answer}{error}".rstrip()
        )
