"""The jobstream CLI: consumer commands over the HTTP API, operator commands through the layer.

    jobstream [--local] [--url URL] [--token TOKEN] [--output auto|table|json] COMMAND …

Consumer: `jobs list|show`, `events JOB_ID [--follow]`, `feed [--consumer NAME] [--follow]` (the
tenant's event feed), `callbacks JOB_ID` (how its callbacks were delivered), `dead-callbacks`
and `redrive [--job J | --since MS]` (one's own dead letters), `submit`, `cancel`, `ack`,
`smoke` (one job end to end through any deployment), `conformance` (the protocol conformance
kit). Operator: `dlq list|redrive` (also `dead-letters`), `sweep`, `resources` (shared resources'
slots, waiters, pace and back-off), `tenants …` (the consumer registry).
"""

from __future__ import annotations

from typing import Annotated

import typer

from jobstream_cli.commands import (
    ack,
    callbacks,
    cancel,
    events,
    feed,
    jobs,
    operator,
    redrive,
    resources,
    smoke,
    submit,
    tenants,
)
from jobstream_cli.commands.conformance import conformance
from jobstream_cli.errors import GuardedGroup
from jobstream_cli.state import Output, resolve
from jobstream_cli.version import version_line

app = typer.Typer(
    name="jobstream",
    cls=GuardedGroup,
    help="Submit, watch and operate jobstream jobs.",
    no_args_is_help=True,
    add_completion=False,
    # Expected failures are one line (GuardedGroup); anything else is a bug worth its traceback.
    pretty_exceptions_show_locals=False,
)


def _print_version(requested: bool) -> None:
    if requested:
        typer.echo(version_line())
        raise typer.Exit


@app.callback()
def root(
    ctx: typer.Context,
    local: Annotated[
        bool,
        typer.Option(
            "--local",
            help="use the running local stack (`make run`): its URL, token and environment",
        ),
    ] = False,
    url: Annotated[
        str | None,
        typer.Option(
            help="base URL of the API \\[env JOBSTREAM_URL; default http://127.0.0.1:3000]"
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="bearer token \\[env JOBSTREAM_TOKEN; default local-dev-token]"),
    ] = None,
    output: Annotated[
        Output,
        typer.Option(
            "--output",
            "-o",
            help="auto: tables on a terminal, JSON when piped",
            case_sensitive=False,
        ),
    ] = Output.AUTO,
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="print the version and exit",
        ),
    ] = False,
) -> None:
    """Submit, watch and operate jobstream jobs."""
    ctx.obj = resolve(url=url, token=token, local=local, output=output)


app.add_typer(jobs.app, name="jobs")
app.command("events")(events.events)
app.command("feed")(feed.feed)
app.command("callbacks")(callbacks.callbacks)
app.command("dead-callbacks")(redrive.dead_callbacks)
app.command("redrive")(redrive.redrive)
app.command("submit")(submit.submit)
app.command("cancel")(cancel.cancel)
app.command("ack")(ack.ack)
app.command("smoke")(smoke.smoke)
app.add_typer(operator.dlq_app, name="dlq")
app.add_typer(operator.dlq_app, name="dead-letters", help="Alias of `dlq`.", hidden=False)
app.command("sweep")(operator.sweep)
app.command("resources")(resources.resources)
app.command("conformance")(conformance)
app.add_typer(tenants.app, name="tenants")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (for `python -m` and for tests)."""
    try:
        app(args=argv, prog_name="jobstream")
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
