"""`jobstream tenants …`: the consumer registry (operator).

Against a local file (`--file`, or JOBSTREAM_TENANTS) or the deployed stack's secret
(`--secret`, or JOBSTREAM_TENANTS_SECRET; the stack output TenantsSecretArn). A new API token or
signing secret is printed once and never stored in the clear (tokens are kept as digests).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.table import Table

from jobstream.config.tenants import TenantRegistry
from jobstream_cli.commands import endpoints
from jobstream_cli.commands.operator import operator_errors
from jobstream_cli.errors import CliError
from jobstream_cli.state import Cli, current
from jobstream_cli.tenant_registry import (
    FileStore,
    Issued,
    RegistryStore,
    SecretStore,
    add_tenant,
    parse_duration,
    remove_tenant,
    rotate_secret,
    rotate_token,
    set_callback_token,
    set_origins,
    set_quotas,
    summary,
)

_STORE_KEY: Final = "jobstream.tenants.store"
UNLIMITED: Final = "unlimited"

Rotation = Callable[..., tuple[TenantRegistry, Issued]]

app = typer.Typer(help="The consumer registry: tenants, their tokens, secrets, origins and quotas.")

NameArgument = Annotated[str, typer.Argument(help="tenant name (a-z, 0-9, '-', '_')")]
OverlapOption = Annotated[
    str,
    typer.Option(
        help="how long the previous ones stay in force (0 ends them now; e.g. 30m, 24h, 7d)"
    ),
]


@app.callback(no_args_is_help=True)
def tenants(
    ctx: typer.Context,
    file: Annotated[
        Path | None,
        typer.Option("--file", help="a local registry file [env JOBSTREAM_TENANTS]"),
    ] = None,
    secret: Annotated[
        str | None,
        typer.Option(
            "--secret",
            help="the stack's registry secret, name or ARN [env JOBSTREAM_TENANTS_SECRET]",
        ),
    ] = None,
) -> None:
    """The consumer registry: tenants, their tokens, secrets and origins."""
    ctx.meta[_STORE_KEY] = (file, secret)


def _store(ctx: typer.Context) -> RegistryStore:
    file, secret = ctx.meta.get(_STORE_KEY, (None, None))
    if file is not None and secret is not None:
        raise typer.BadParameter("give --file or --secret, not both")
    if file is None and secret is None:
        secret = os.environ.get("JOBSTREAM_TENANTS_SECRET", "").strip() or None
        path = os.environ.get("JOBSTREAM_TENANTS", "").strip()
        if secret is not None and path:
            raise CliError("both JOBSTREAM_TENANTS_SECRET and JOBSTREAM_TENANTS are set")
        file = Path(path) if path else None
    if secret is not None:
        import boto3

        return SecretStore(secret, boto3.client("secretsmanager"))
    if file is not None:
        return FileStore(file)
    if os.environ.get("JOBSTREAM_API_TOKENS", "").strip():
        raise CliError(
            "the registry is the JOBSTREAM_API_TOKENS shorthand (the environment), which "
            "cannot be edited: use a registry file (--file / JOBSTREAM_TENANTS)"
        )
    raise CliError(
        "name the registry: --file PATH (local) or --secret ID (AWS: the stack output "
        "TenantsSecretArn)"
    )


def _now() -> datetime:
    return datetime.now(tz=UTC).replace(microsecond=0)


def _overlap(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="'--overlap'") from None


def _issued(state: Cli, store: RegistryStore, action: str, issued: Issued) -> None:
    """The new credentials, shown this once."""
    if state.json:
        state.emit_json(
            {
                "tenant": issued.tenant,
                "action": action,
                "api_token": issued.api_token,
                "signing_secret": issued.signing_secret,
                "registry": store.description,
                "takes_effect": store.takes_effect,
            }
        )
        return
    state.out.print(f"tenant {issued.tenant}: {action} ({store.description}); {store.takes_effect}")
    if issued.api_token is not None:
        state.out.print("API token (shown once; the consumer sends it as its bearer token):")
        state.out.print(issued.api_token, soft_wrap=True)
    if issued.signing_secret is not None:
        state.out.print("signing secret (shown once; the consumer verifies callbacks with it):")
        state.out.print(issued.signing_secret, soft_wrap=True)


def _done(state: Cli, store: RegistryStore, tenant: str, action: str) -> None:
    if state.json:
        state.emit_json(
            {
                "tenant": tenant,
                "action": action,
                "registry": store.description,
                "takes_effect": store.takes_effect,
            }
        )
    else:
        state.out.print(f"tenant {tenant}: {action} ({store.description}); {store.takes_effect}")


@app.command("list")
def list_tenants(ctx: typer.Context) -> None:
    """Every tenant: tokens and secrets in force (never their values), callback token, origins."""
    state = current(ctx)
    store = _store(ctx)
    with operator_errors():
        rows = summary(store.read(), _now())
    if state.json:
        state.emit_json(rows)
        return
    if not rows:
        state.out.print(f"no tenants ({store.description})")
        return
    table = Table(
        "tenant", "API tokens", "callback token", "signing secrets", "callback origins", "quotas"
    )
    for row in rows:
        if row["removed_at"] is not None:
            table.add_row(row["tenant"], f"removed {row['removed_at']}", "", "", "", "")
            continue
        table.add_row(
            row["tenant"],
            _in_force(row["api_tokens"]),
            "set" if row["callback_token"] else "none",
            _in_force(row["signing_secrets"]),
            "any public https"
            if row["callback_origins"] is None
            else "\n".join(row["callback_origins"]) or "none",
            _quota_text(row["quotas"] or {}) or "unlimited",
        )
    state.out.print(table)


def _in_force(entries: list[dict[str, Any]]) -> str:
    live = [entry for entry in entries if entry["in_force"]]
    expiring = sorted(entry["expires_at"] for entry in live if entry["expires_at"])
    text = f"{len(live)} in force"
    return f"{text}, one until {expiring[0]}" if expiring else text


@app.command("add")
def add(
    ctx: typer.Context,
    name: NameArgument,
    *,
    origin: Annotated[
        list[str] | None,
        typer.Option(
            "--origin",
            help="an allowed callback origin, repeatable (default: any public https origin)",
        ),
    ] = None,
    signing_secret: Annotated[
        bool, typer.Option(help="generate a signing secret for its callbacks")
    ] = True,
    api_token_stdin: Annotated[
        bool,
        typer.Option(
            "--api-token-stdin",
            help="use the token on stdin (one the consumer already has) instead of a new one",
        ),
    ] = False,
    restore: Annotated[
        bool,
        typer.Option(
            "--restore",
            help="bring a removed tenant back: the same consumer, its jobs its own again",
        ),
    ] = False,
) -> None:
    """Add a tenant with a new API token (and signing secret), printed once.

    A removed tenant's name is refused (a new consumer under it would inherit the old one's jobs)
    unless --restore says it is the same consumer coming back."""
    state = current(ctx)
    store = _store(ctx)
    token = _read_secret("API token") if api_token_stdin else None
    with operator_errors():
        issued = store.edit(
            lambda registry: add_tenant(
                registry,
                name,
                now=_now(),
                origins=origin or None,
                signing_secret=signing_secret,
                api_token=token,
                restore=restore,
            )
        )
    _issued(state, store, "restored" if restore else "added", issued)


@app.command("rotate-token")
def rotate_token_command(
    ctx: typer.Context, name: NameArgument, overlap: OverlapOption = "24h"
) -> None:
    """A new API token, printed once; the old ones are refused after the overlap."""
    _rotate(ctx, name, overlap, rotate_token, "new API token")


@app.command("rotate-secret")
def rotate_secret_command(
    ctx: typer.Context, name: NameArgument, overlap: OverlapOption = "24h"
) -> None:
    """A new signing secret, printed once; callbacks carry both signatures during the overlap."""
    _rotate(ctx, name, overlap, rotate_secret, "new signing secret")


def _rotate(ctx: typer.Context, name: str, overlap: str, rotation: Rotation, what: str) -> None:
    state = current(ctx)
    store = _store(ctx)
    period = _overlap(overlap)
    with operator_errors():
        issued = store.edit(lambda registry: rotation(registry, name, now=_now(), overlap=period))
    _issued(state, store, f"{what}, the old ones end in {overlap}", issued)


@app.command("set-callback-token")
def set_callback_token_command(
    ctx: typer.Context,
    name: NameArgument,
    clear: Annotated[bool, typer.Option(help="send no Authorization header any more")] = False,
) -> None:
    """Set the bearer token the consumer issued for its callbacks (read from stdin)."""
    state = current(ctx)
    store = _store(ctx)
    token = None if clear else _read_secret("callback token")
    with operator_errors():
        store.edit(lambda registry: (set_callback_token(registry, name, token), None))
    _done(state, store, name, "callback token cleared" if clear else "callback token set")


@app.command("set-origins")
def set_origins_command(
    ctx: typer.Context,
    name: NameArgument,
    origins: Annotated[
        list[str] | None,
        typer.Argument(help="scheme://host[:port]; host may be *.domain, port may be *"),
    ] = None,
    any_public: Annotated[
        bool,
        typer.Option("--any-public", help="drop the list: any public https origin"),
    ] = False,
) -> None:
    """Replace the callback origins a tenant may use."""
    state = current(ctx)
    if bool(origins) == any_public:
        raise typer.BadParameter("give the origins, or --any-public")
    store = _store(ctx)
    allowed = None if any_public else list(origins or [])
    with operator_errors():
        store.edit(lambda registry: (set_origins(registry, name, allowed), None))
    _done(state, store, name, "origins: any public https" if any_public else "origins set")


def _quota(text: str | None, option: str) -> int | None:
    """A quota option's value: a positive whole number, or `unlimited`."""
    if text is None or text == UNLIMITED:
        return None
    if not text.isdigit() or int(text) < 1:
        raise typer.BadParameter(f"a whole number from 1, or {UNLIMITED}", param_hint=option)
    return int(text)


@app.command("set-quotas")
def set_quotas_command(
    ctx: typer.Context,
    name: NameArgument,
    max_open_jobs: Annotated[
        str | None,
        typer.Option(help=f"jobs open at once (not finished), or {UNLIMITED}"),
    ] = None,
    admissions_per_minute: Annotated[
        str | None,
        typer.Option(help=f"new jobs admitted per minute, or {UNLIMITED}"),
    ] = None,
) -> None:
    """Set a tenant's quotas; one not given stays as it is. Over a quota, POST /jobs answers
    429 quota_exceeded (a replay never)."""
    state = current(ctx)
    changes = {
        option: _quota(value, f"'--{option.replace('_', '-')}'")
        for option, value in (
            ("max_open_jobs", max_open_jobs),
            ("admissions_per_minute", admissions_per_minute),
        )
        if value is not None
    }
    if not changes:
        raise typer.BadParameter("give --max-open-jobs, --admissions-per-minute or both")
    store = _store(ctx)

    def change(registry: TenantRegistry) -> tuple[TenantRegistry, TenantRegistry]:
        updated = set_quotas(registry, name, changes)
        return updated, updated

    with operator_errors():
        quotas = store.edit(change).tenants[name].quotas
    shown = quotas.model_dump(exclude_none=True) if quotas is not None else {}
    _done(state, store, name, "quotas: " + (_quota_text(shown) or "none (unlimited)"))


def _quota_text(quotas: dict[str, int]) -> str:
    return ", ".join(f"{quota} {value}" for quota, value in quotas.items())


@app.command("remove")
def remove(
    ctx: typer.Context,
    name: NameArgument,
    yes: Annotated[bool, typer.Option("--yes", help="do not ask")] = False,
) -> None:
    """Remove a tenant: its tokens are refused, its pending callbacks are dead-lettered, its name
    is kept (a tombstone) so that only `add NAME --restore` gives its jobs to anyone again."""
    state = current(ctx)
    store = _store(ctx)
    if not yes:
        if not sys.stdin.isatty():
            raise CliError("removing a tenant needs --yes when not asked on a terminal")
        typer.confirm(
            f"remove tenant {name}? Its tokens stop working and its callbacks die", abort=True
        )
    with operator_errors():
        store.edit(lambda registry: (remove_tenant(registry, name, now=_now()), None))
    _done(state, store, name, "removed")


def _read_secret(what: str) -> str:
    """A secret from stdin (a prompt with no echo on a terminal): never from the command line,
    where it would stay in the shell's history and the process list."""
    raw = typer.prompt(what, hide_input=True) if sys.stdin.isatty() else sys.stdin.read()
    value = str(raw).strip()
    if not value:
        raise CliError(f"no {what} on stdin")
    return value


# Endpoint health lives in the table, not the registry: its commands are their own module.
app.command("endpoints")(endpoints.list_endpoints)
app.command("enable-endpoint")(endpoints.enable_endpoint)
