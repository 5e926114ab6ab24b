"""`jobstream tenants endpoints` and `jobstream tenants enable-endpoint`: callback endpoints'
health (service/endpoints.py), read from and written to the table the functions use (the
environment, as `dlq` and `sweep` read it)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from jobstream_cli.commands.operator import operator_errors, operator_runtime
from jobstream_cli.errors import CliError
from jobstream_cli.state import current


def list_endpoints(
    ctx: typer.Context,
    name: Annotated[
        str | None, typer.Argument(help="one tenant (default: every tenant in force)")
    ] = None,
) -> None:
    """Each tenant's callback endpoints (origins it has called back) and their health."""
    from jobstream.service.endpoints import health_report

    state = current(ctx)
    with operator_errors():
        rt = operator_runtime()
        names = [name] if name is not None else sorted(rt.tenants().tenants)
        rows = health_report(rt, names)
    if state.json:
        state.emit_json(rows)
        return
    if not rows:
        state.out.print("no callback endpoints recorded (every endpoint is healthy)")
        return
    table = Table("tenant", "origin", "state", "since", "failures", "next probe", "last error")
    for row in rows:
        table.add_row(*(_cell(row[key]) for key in _COLUMNS))
    state.out.print(table)


_COLUMNS = ("tenant", "origin", "state", "changed_at", "failures", "next_probe_at", "last_error")


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def enable_endpoint(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the tenant")],
    origin: Annotated[str, typer.Argument(help="the endpoint's origin, scheme://host[:port]")],
) -> None:
    """Enable a disabled (410 Gone) or paused endpoint again: its held callbacks are sent now,
    oldest first."""
    from jobstream.service.endpoints import enable, endpoint_of

    state = current(ctx)
    endpoint = endpoint_of(name, origin)
    if endpoint is None:
        raise typer.BadParameter(f"{origin!r} is not an origin", param_hint="'ORIGIN'")
    with operator_errors():
        enabled = enable(operator_runtime(), endpoint)
    if not enabled:
        raise CliError(
            f"endpoint {endpoint.origin} of tenant {name} is neither disabled nor paused"
        )
    result = {"tenant": name, "origin": endpoint.origin, "state": "healthy"}
    if state.json:
        state.emit_json(result)
    else:
        state.out.print(f"tenant {name}: endpoint {endpoint.origin} enabled; its callbacks resume")
