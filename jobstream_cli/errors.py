"""Failures the user can act on, and the one place that turns them into a line on stderr."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

INTERRUPTED = 130  # the shell's code for a process stopped by SIGINT


class CliError(Exception):
    """An expected failure (unreachable target, an error envelope, bad input, configuration):
    printed as one line, exit code 1 — never a traceback."""

    exit_code = 1


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
        except KeyboardInterrupt:
            typer.echo("jobstream: interrupted", err=True)
            raise typer.Exit(INTERRUPTED) from None
