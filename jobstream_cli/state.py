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

# Written by the running local stack (`make run`), removed when it stops; JOBSTREAM_LOCAL_ENV_FILE
# names another place (the stack's setting of the same name).
LOCAL_ENV: Path = Path(__file__).resolve().parent.parent / ".jobstream" / "local-env.json"
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
        try:
            return api.connect(self.url, self.token)
        except ValueError as error:  # not an http(s) URL, or one carrying credentials
            raise typer.BadParameter(str(error), param_hint="'--url' / JOBSTREAM_URL") from None

    def emit_json(self, value: Any, *, line: bool = False) -> None:
        """Indented JSON, or one compact line per value for streams (NDJSON)."""
        text = json.dumps(value, ensure_ascii=False, indent=None if line else 2)
        typer.echo(text)


def load_local_env(path: Path | None = None) -> dict[str, str]:
    """The local stack's environment; applied to this process so operator commands see it."""
    configured = os.environ.get("JOBSTREAM_LOCAL_ENV_FILE", "").strip()
    source = path or (Path(configured) if configured else LOCAL_ENV)
    if not source.exists():
        raise CliError("no local stack is running (start it with `make run`)")
    try:
        values = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read {source.name} of the local stack: {error}") from None
    if not isinstance(values, dict):
        raise CliError(f"{source.name} of the local stack is not a JSON object")
    env = {str(name): str(value) for name, value in values.items()}
    os.environ.update(env)
    return env


def local_url(env: dict[str, str]) -> str:
    """The stack's URL: JOBSTREAM_URL if it wrote one, else its port on 127.0.0.1."""
    if env.get("JOBSTREAM_URL"):
        return env["JOBSTREAM_URL"]
    port = env.get("JOBSTREAM_PORT") or "3000"
    return f"http://127.0.0.1:{port}"


def local_token(env: dict[str, str]) -> str:
    """The first token of the stack's JOBSTREAM_API_TOKENS (`tenant=token,…`)."""
    first = env.get("JOBSTREAM_API_TOKENS", "").split(",", 1)[0]
    return first.partition("=")[2].strip() or DEFAULT_TOKEN


def resolve(*, url: str | None, token: str | None, local: bool, output: Output) -> Cli:
    """Flags first; then the local stack (--local); then the environment; then the defaults."""
    env = load_local_env() if local else {}
    return Cli(
        url=url or (local_url(env) if local else os.environ.get("JOBSTREAM_URL") or DEFAULT_URL),
        token=token
        or (local_token(env) if local else os.environ.get("JOBSTREAM_TOKEN") or DEFAULT_TOKEN),
        output=output,
        local=local,
    )


def current(ctx: typer.Context) -> Cli:
    """The Cli the root callback resolved for this invocation."""
    state = ctx.find_object(Cli)
    if state is None:  # only when a command is invoked without the root group
        raise RuntimeError("jobstream_cli commands run under the root app")
    return state
