"""Failures the user can act on, and the one place that turns them into a line on stderr."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from jobstream_client import JobstreamError, TransportError

INTERRUPTED = 130  # the shell's code for a process stopped by SIGINT


class CliError(Exception):
    """An expected failure (unreachable target, an error envelope, bad input, configuration):
    printed as one line, exit code 1 — never a traceback."""

    exit_code = 1


def explain(error: JobstreamError, *, local: bool) -> str:
    """The one line for a failed API call: the SDK's `code: message (HTTP status)` for an error
    envelope, `cannot reach URL: why` for a network failure, with a hint when nothing listens."""
    if isinstance(error, TransportError) and error.refused:
        where = "start it with `make run`" if local else "see --url / JOBSTREAM_URL"
        return f"{error} (is the stack running? {where})"
    return str(error)


class GuardedGroup(TyperGroup):
    """The root group: every command runs inside its invoke, so errors are mapped once here
    (also under Typer's CliRunner, which does not go through `main`)."""

    # Any: the context class lives in Typer's vendored click, which is private.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CliError as error:
            typer.echo(f"jobstream: {error}", err=True)
            raise typer.Exit(error.exit_code) from None
        except JobstreamError as error:
            # ctx.obj is the resolved Cli (state.py) once the root callback ran.
            local = bool(getattr(ctx.obj, "local", False))
            typer.echo(f"jobstream: {explain(error, local=local)}", err=True)
            raise typer.Exit(CliError.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("jobstream: interrupted", err=True)
            raise typer.Exit(INTERRUPTED) from None
