"""`jobstream resources`: each shared resource's slots, waiters, pace and back-off
(service/resources.py), read from the table the functions use (the environment, as `sweep`)."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from jobstream_cli.commands.operator import operator_errors, operator_runtime
from jobstream_cli.state import current

_COLUMNS = (
    "resource",
    "max_concurrent",
    "per_minute",
    "slots_in_use",
    "waiting",
    "backed_off_ms",
    "backoff_reason",
    "next_request_in_ms",
)


def resources(ctx: typer.Context) -> None:
    """Shared resources (a source account): slots in use of max_concurrent, jobs waiting for
    one, the request pace (per_minute) and any back-off after a rate limit."""
    from jobstream.service.resources import report

    state = current(ctx)
    with operator_errors():
        rows = report(operator_runtime())
    if state.json:
        state.emit_json(rows)
        return
    if not rows:
        state.out.print("no shared resources are configured")
        return
    table = Table(
        "resource", "max", "per minute", "in use", "waiting", "backed off", "why", "next request"
    )
    for row in rows:
        table.add_row(*(_cell(name, row[name]) for name in _COLUMNS))
    state.out.print(table)
    for row in rows:
        holders = row["holders"]
        if isinstance(holders, list) and holders:
            state.out.print(f"{row['resource']}: held by {', '.join(map(str, holders))}")


def _cell(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name.endswith("_ms"):
        return f"{value / 1000:.1f} s" if value else ""
    return str(value)
