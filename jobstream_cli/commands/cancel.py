"""`cancel JOB_ID`: stop a job that has not finished (idempotent, as the API is)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from jobstream_cli.commands.jobs import print_job
from jobstream_cli.render import status
from jobstream_cli.state import current


def cancel(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(help="the job to cancel")],
) -> None:
    """Cancel a queued or running job; a finished job is shown unchanged."""
    state = current(ctx)
    job = state.client().cancel(job_id)
    if job.status == "cancelled":
        heading = Text(f"cancelled {job_id}", style="bold")
    else:
        # The API answers a finished job unchanged: say so, the job did not stop now.
        heading = Text(f"{job_id} had already finished (")
        heading.append_text(status(job.status))
        heading.append("): nothing to cancel")
    print_job(state, job, heading)
