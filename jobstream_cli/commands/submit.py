"""`submit`: build a Task of any registered job type, POST it, print the job, follow its events."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from jobstream.jobtypes import registry
from jobstream_cli.commands.events import print_events
from jobstream_cli.errors import CliError
from jobstream_cli.render import job_detail, now_ms
from jobstream_cli.state import current


def load_task(path: Path) -> dict[str, Any]:
    """A Task from a JSON file (`-` reads stdin)."""
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        task = json.loads(text)
    except ValueError as error:
        raise CliError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(task, dict):
        raise CliError(f"{path} must hold a JSON object (a Task)")
    return task


def parse_param(text: str) -> tuple[str, Any]:
    """`NAME=VALUE`: VALUE as JSON when it parses (numbers, arrays, objects), else a string."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise typer.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="'--param'")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def build_task(
    base: dict[str, Any],
    *,
    job_type: str | None = None,
    params_given: list[str] | None = None,
    target_id: str | None,
    tags: list[str],
    expand: bool | None,
    limit: int | None,
    key: str | None,
    callback_url: str | None,
    correlation_id: str | None,
) -> dict[str, Any]:
    """The file's Task (or a fresh one) with the options laid over it; a random key if none."""
    task = dict(base)
    task.setdefault("protocol_version", "1")
    if job_type is not None:
        task["job_type"] = job_type
    # Without one, the first job type the registry lists (what capabilities lists first).
    task.setdefault("job_type", registry.names()[0])
    params = dict(task.get("params") or {})
    params.update(parse_param(text) for text in params_given or [])
    if target_id is not None:
        params["target_id"] = target_id
    if tags or expand is not None:
        query = dict(params.get("query") or {})
        if tags:
            query["tags"] = tags
        if expand is not None:
            query["expand"] = expand
        if not query.get("tags"):
            raise typer.BadParameter("needs at least one --tag", param_hint="'--expand'")
        params["query"] = query
    if limit is not None:
        params["constraints"] = {**(params.get("constraints") or {}), "limit": limit}
    task["params"] = params
    task.update(
        {
            name: value
            for name, value in (("callback_url", callback_url), ("correlation_id", correlation_id))
            if value is not None
        }
    )
    if key is not None:
        task["idempotency_key"] = key
    # Idempotency is per key: without one, every submit is a new job.
    task.setdefault("idempotency_key", f"cli-{uuid.uuid4()}")
    return task


def _job_type(value: str | None) -> str | None:
    if value is not None and value not in registry.names():
        raise typer.BadParameter(
            f"{value!r} is not a job type; one of {', '.join(registry.names())}"
        )
    return value


def submit(
    ctx: typer.Context,
    *,
    job_type: Annotated[
        str | None,
        typer.Option(
            "--job-type",
            "-j",
            callback=_job_type,
            help=f"the job type: {', '.join(registry.names())} (default: the first)",
        ),
    ] = None,
    params_given: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            help="a params key as NAME=VALUE, VALUE as JSON when it parses (repeat for more)",
        ),
    ] = None,
    target_id: Annotated[str | None, typer.Option(help="the target (params.target_id)")] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="a query tag (repeat for more)")
    ] = None,
    expand: Annotated[
        bool | None, typer.Option("--expand/--no-expand", help="tag expansion (OR)")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="number of candidates")] = None,
    key: Annotated[str | None, typer.Option(help="idempotency key (default: a random one)")] = None,
    callback_url: Annotated[str | None, typer.Option(help="POST every event here")] = None,
    correlation_id: Annotated[str | None, typer.Option(help="correlation id")] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-F", help="a Task JSON file (`-`: stdin); options override it"),
    ] = None,
    follow_stream: Annotated[
        bool, typer.Option("--follow/--no-follow", help="follow the job's events afterwards")
    ] = True,
) -> None:
    """Submit a Task of any job type, print the job, then follow its events."""
    state = current(ctx)
    task = build_task(
        load_task(file) if file is not None else {},
        job_type=job_type,
        params_given=params_given,
        target_id=target_id,
        tags=tags or [],
        expand=expand,
        limit=limit,
        key=key,
        callback_url=callback_url,
        correlation_id=correlation_id,
    )
    answer = state.client().submit(task)
    job = answer.job
    if answer.replayed:
        # 200, not 202: nothing new was admitted. Said on stderr too, so JSON stays the job.
        note = f"replay: key {task['idempotency_key']!r} already named this job (HTTP 200)"
        if answer.attempts > 1:
            # An earlier attempt's answer was lost and the SDK sent the Task again: that
            # attempt may be what created the job.
            note += f" on attempt {answer.attempts}; an earlier attempt may have created it"
        else:
            note += "; nothing new was submitted"
        if state.json:
            typer.echo(f"jobstream: {note}", err=True)
        else:
            state.out.print(Text(f"{job.job_id}: {note}", style="bold yellow"))
    elif not state.json:
        state.out.print(Text(f"submitted {job.job_id} (HTTP 202)", style="bold"))
    if state.json:
        state.emit_json(job.raw, line=follow_stream)
    else:
        state.out.print(job_detail(job.raw, now_ms()))
    if follow_stream:
        print_events(state, job.job_id, follow_stream=True)
