"""What every command needs: where the API is, the token, the output mode and the consoles."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any, Final

import typer
from rich.console import Console

from jobstream_cli import api
from jobstream_cli.errors import CliError
from jobstream_client import Client

DEFAULT_URL: Final = "http://127.0.0.1:3000"
DEFAULT_TOKEN: Final = "local-dev-token"  # noqa: S105 - the local stack's public token
# Tables wider than a pipe's default 80 columns, unless COLUMNS says otherwise.
PIPE_WIDTH: Final = 160


class Output(StrEnum):
    AUTO = "auto"
    TABLE = "table"
    JSON = "json"


@dataclass
class Cli:
    url: str
    token: str
    output: Output = Output.AUTO
    local: bool = False  # --local: the running local stack's URL and token

    @property
    def json(self) -> bool:
        """JSON when asked, or by default when stdout is not a terminal (scripts, pipes)."""
        return self.output is Output.JSON or (
            self.output is Output.AUTO and not sys.stdout.isatty()
        )

    @cached_property
    def out(self) -> Console:
        # file=None: Rich writes to whatever sys.stdout is at the time (CliRunner swaps it).
        width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH
        return Console(highlight=False, width=width)

    def client(self) -> Client:
        """The consumer SDK's client of the API (api.py: its retries and timeout)."""
        if not self.token:  # only --local leaves it empty: the stack wrote none
            raise CliError(
                "the local stack has no token for the CLI (it said why when it started: its "
                "registry's tenant `local` is removed, or the registry could not be edited); "
                "give one with --token"
            )
        try:
            return api.connect(self.url, self.token)
        except ValueError as error:  # not an http(s) URL, or one carrying credentials
            raise typer.BadParameter(str(error), param_hint="'--url' / JOBSTREAM_URL") from None

    def emit_json(self, value: Any, *, line: bool = False) -> None:
        """Indented JSON, or one compact line per value for streams (NDJSON)."""
        text = json.dumps(value, ensure_ascii=False, indent=None if line else 2)
        typer.echo(text)


def load_local_env() -> dict[str, str]:
    """The running local stack's environment (its local-env file), applied to this process in
    place of the shell's AWS and functions' settings, so operator commands act on that stack."""
    from jobstream_local import local_env

    path = local_stack_file()
    try:
        values = local_env.read(path)
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read {path.name} of the local stack: {error}") from None
    if values is None:  # it stopped just now
        raise CliError("no local stack is running (start it with `make run`)")
    _apply(values)
    return values


def local_stack_file() -> Path:
    """The file of the stack --local means: the one on JOBSTREAM_PORT if set (as for `make
    run`), else the only one running."""
    from jobstream_local import local_env

    stacks = local_env.running(local_env.directory(os.environ))
    port = os.environ.get("JOBSTREAM_PORT", "").strip()
    if port and port != "0":  # 0 names no stack: `make run` then picks a free port
        found = stacks.get(int(port)) if port.isdigit() else None
        if found is None:
            raise CliError(
                f"no local stack is running on port {port} (JOBSTREAM_PORT; start one with "
                f"`JOBSTREAM_PORT={port} make run`)"
            )
        return found
    if len(stacks) == 1:
        return next(iter(stacks.values()))
    if not stacks:
        raise CliError("no local stack is running (start it with `make run`)")
    ports = ", ".join(map(str, stacks))
    raise CliError(
        f"{len(stacks)} local stacks are running (ports {ports}): choose one with "
        "JOBSTREAM_PORT=<port>"
    )


def _apply(values: dict[str, str]) -> None:
    """The stack's values replace what the shell says of AWS and of the functions' settings (a
    registry or table of the shell's own would not be the stack's)."""
    from jobstream.config.settings import ENVIRONMENT, SHORTHAND

    stack_scoped = {*ENVIRONMENT.values(), *SHORTHAND.values()}
    for name in [name for name in os.environ if name.startswith("AWS_") or name in stack_scoped]:
        del os.environ[name]
    os.environ.update(values)


def resolve(*, url: str | None, token: str | None, local: bool, output: Output) -> Cli:
    """Flags first; then the local stack (--local: its URL and the token it wrote, never a
    guess); then the environment; then the defaults."""
    if local:
        env = load_local_env()
        return Cli(
            url=url or env["JOBSTREAM_URL"],
            token=token or env.get("JOBSTREAM_TOKEN", ""),
            output=output,
            local=True,
        )
    return Cli(
        url=url or os.environ.get("JOBSTREAM_URL") or DEFAULT_URL,
        token=token or os.environ.get("JOBSTREAM_TOKEN") or DEFAULT_TOKEN,
        output=output,
    )


def current(ctx: typer.Context) -> Cli:
    """The Cli the root callback resolved for this invocation."""
    state = ctx.find_object(Cli)
    if state is None:  # only when a command is invoked without the root group
        raise RuntimeError("jobstream_cli commands run under the root app")
    return state
