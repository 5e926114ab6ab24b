"""Operator commands through the layer's services: dead letters and the sweep.

They use the environment exactly as the functions do (on AWS: the table, the queue URLs), or the
running local stack's with --local.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from jobstream_cli.errors import CliError
from jobstream_cli.render import counts_table, dead_letters_view
from jobstream_cli.state import Cli, current

if TYPE_CHECKING:
    from jobstream.runtime import Runtime

# Below this many, a redrive is quick enough that a progress bar would only flash.
PROGRESS_FROM: Final = 20
HOW: Final = {
    "none": "no callback queue is configured: nothing was sent",
    "moved": "moved {n} message(s) from the dead-letter queue back to the callback queue",
    "move-task": "started an SQS message move task for ~{n} message(s)",
    "sent": "sent {n} message(s) to the callback queue",
}

dlq_app = typer.Typer(help="Dead-lettered callbacks (operator).", no_args_is_help=True)


@contextmanager
def operator_errors() -> Iterator[None]:
    """Configuration and AWS failures as one line each (the layer imports boto3 lazily)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from jobstream.config.settings import ConfigurationError

    try:
        yield
    except ConfigurationError as error:
        raise CliError(
            f"{error} (operator commands read the environment as the functions do; "
            "use --local for the running local stack)"
        ) from None
    except ClientError as error:
        detail = error.response.get("Error", {})
        raise CliError(
            f"AWS {detail.get('Code', 'error')}: {detail.get('Message', error)}"
        ) from None
    except BotoCoreError as error:
        raise CliError(f"AWS: {error}") from None


def operator_runtime() -> Runtime:
    # Looked up at call time: tests replace the process-wide runtime.
    from jobstream import runtime as runtime_module

    return runtime_module.runtime()


def _busy(state: Cli, message: str) -> AbstractContextManager[object]:
    if not state.json and state.out.is_terminal:
        return state.out.status(message, spinner="dots")
    return nullcontext()


@dlq_app.command("list")
def list_dead_letters(ctx: typer.Context) -> None:
    """Dead callbacks, oldest first: job, event, target, attempts, last error."""
    from jobstream.service.dead_letters import list_dead

    state = current(ctx)
    with operator_errors(), _busy(state, "reading dead letters"):
        dead = list_dead(operator_runtime())
    if state.json:
        state.emit_json(dead)
    elif not dead:
        state.out.print("no dead letters")
    else:
        state.out.print(dead_letters_view(dead, state.out.width))


@dlq_app.command("redrive")
def redrive(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Option(help="only this job's dead letters")] = None,
) -> None:
    """Give dead callbacks a fresh budget and send them again."""
    state = current(ctx)
    with operator_errors():
        report = _redrive(state, operator_runtime(), job)
    if state.json:
        state.emit_json(report)
        return
    state.out.print(f"revived {report['revived']} dead callback(s)")
    state.out.print(
        HOW.get(report["how"], "{n} message(s): " + report["how"]).format(
            n=report["messages_moved"]
        )
    )


def _redrive(state: Cli, rt: Runtime, job_id: str | None) -> dict[str, Any]:
    """service.dead_letters.redrive, with a progress bar when there are many."""
    from jobstream.service.dead_letters import redrive

    with Progress(
        TextColumn("reviving"),
        BarColumn(),
        MofNCompleteColumn(),
        console=state.out,
        transient=True,
        disable=state.json or not state.out.is_terminal,
    ) as progress:
        # How many there are is known only at the end: they are read a page at a time.
        task = progress.add_task("revive", total=None)

        def advance(done: int) -> None:
            # Shown only for large redrives: a bar for a handful of items is noise.
            progress.update(task, completed=done, visible=done >= PROGRESS_FROM)

        report = redrive(rt, job_id=job_id, on_progress=advance)
    return {"revived": report.revived, "messages_moved": report.messages_moved, "how": report.how}


def sweep(ctx: typer.Context) -> None:
    """Run the reconcile sweep once and print its counts."""
    from jobstream.service.sweep import sweep as run_sweep

    state = current(ctx)
    with operator_errors(), _busy(state, "sweeping"):
        counts = run_sweep(operator_runtime()).counts()
    if state.json:
        state.emit_json(counts)
    else:
        state.out.print(counts_table(counts))
