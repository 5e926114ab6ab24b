"""`conformance`: the black-box protocol conformance kit against the URL and token in use."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jobstream_cli.errors import CliError
from jobstream_cli.state import current


def _object(text: str | None) -> dict[str, Any] | None:
    from jobstream_conformance.cli import json_object

    if text is None:
        return None
    try:
        return json_object(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


def conformance(
    ctx: typer.Context,
    *,
    token_b: Annotated[
        str | None,
        typer.Option(
            help="another consumer's token, for the tenancy items", envvar="JOBSTREAM_TOKEN_B"
        ),
    ] = None,
    params: Annotated[str, typer.Option(help="params (JSON) of a Task that succeeds")] = "{}",
    cancel_params: Annotated[
        str | None, typer.Option(help="params of a Task that runs long enough to cancel")
    ] = None,
    fail_params: Annotated[
        str | None, typer.Option(help="params of a Task that finds nothing")
    ] = None,
    job_type: Annotated[str | None, typer.Option(help="the job type (default: the first)")] = None,
    timeout: Annotated[float, typer.Option(min=1, help="seconds a job may take")] = 120.0,
    callback_receiver: Annotated[
        str | None,
        typer.Option(metavar="HOST:PORT", help="listen here for callbacks (push items)"),
    ] = None,
    callback_url: Annotated[
        str | None, typer.Option(help="the URL the producer POSTs to (default: the listener)")
    ] = None,
    callback_secret: Annotated[
        list[str] | None, typer.Option(help="whsec_ secret to verify callbacks (repeatable)")
    ] = None,
    callback_token: Annotated[
        str | None, typer.Option(help="the bearer token callbacks must carry")
    ] = None,
) -> None:
    """Run the Workflow Protocol v1 conformance suite against --url (any producer): a table of
    items with pass/fail/skip/n-a and the evidence; exit 1 when an item fails."""
    from jobstream_conformance import Config, UnreachableError, as_json, failed, run, table

    state = current(ctx)
    config = Config(
        url=state.url,
        token=state.token,
        token_b=token_b,
        params=_object(params) or {},
        cancel_params=_object(cancel_params),
        fail_params=_object(fail_params),
        job_type=job_type,
        timeout_s=timeout,
        receiver=callback_receiver,
        receiver_url=callback_url,
        callback_secrets=tuple(callback_secret or ()),
        callback_token=callback_token,
    )
    try:
        verdicts = run(config)
    except (UnreachableError, ValueError) as error:
        raise CliError(str(error)) from None
    if state.json:
        state.emit_json(as_json(verdicts, state.url))
    else:
        typer.echo(table(verdicts, state.url))
    if failed(verdicts):
        raise typer.Exit(1)
