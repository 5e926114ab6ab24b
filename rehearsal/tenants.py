"""The rehearsal's two tenants, added to the deployed registry the way an operator adds them:
`jobstream tenants --secret <the stack's registry secret> …` against the emulator's endpoint, as
the stack's operator role (assumed with `sts assume-role`, as docs/deploy.md shows): the
registry's resource policy lets no other identity read or write it.

Tenant A gets an API token and a signing secret (printed once by `add`, read from its JSON), the
callback origins of the rehearsal's receivers, and a callback token its receiver "issued"
(`set-callback-token`, on stdin). Tenant B gets an API token only: it is the other consumer that
must not see A's jobs. Nothing here is written to a log: the output holds the new secrets.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

import boto3

from rehearsal.cli import run_cli
from rehearsal.plan import Credentials
from rehearsal.toolchain import REGION, ROOT_CREDENTIALS, RehearsalError, aws_environment

TENANT_A = "rehearsal-a"
TENANT_B = "rehearsal-b"
TAIL_LINES = 20


class Registry:
    """`jobstream -o json tenants --secret SECRET …` in `env`: the emulator as the AWS endpoint,
    the operator role's session as the credentials (`assumed`)."""

    def __init__(self, secret_id: str, env: Mapping[str, str]) -> None:
        self.secret_id = secret_id
        self.env = dict(env)

    def run(self, *arguments: str, stdin: str | None = None) -> Any:
        result = run_cli(
            ["-o", "json", "tenants", "--secret", self.secret_id, *arguments], self.env, stdin
        )
        if result.returncode != 0:
            # stderr only: stdout may hold a token or secret just issued.
            tail = result.stderr.splitlines()[-TAIL_LINES:]
            raise RehearsalError(
                "tenants", f"`jobstream tenants {arguments[0]} …` exited {result.returncode}:\n"
                + "\n".join(tail),
            )  # fmt: skip
        return json.loads(result.stdout)


def assumed(endpoint: str, role_arn: str) -> dict[str, str]:
    """The environment of a session of `role_arn`, assumed with the emulator's root account:
    the emulator's endpoint and the session's credentials, no others."""
    sts = boto3.client(
        "sts",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ROOT_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=ROOT_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    session = sts.assume_role(RoleArn=role_arn, RoleSessionName="rehearsal-operator")
    credentials = session["Credentials"]
    return {
        **aws_environment(endpoint),
        "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
        "AWS_SESSION_TOKEN": credentials["SessionToken"],
    }


def register(registry: Registry, origins: list[str]) -> Credentials:
    """Add both tenants, set A's callback token and origins, and check what the registry holds."""
    origin_options = [part for origin in origins for part in ("--origin", origin)]
    added_a = registry.run("add", TENANT_A, *origin_options)
    callback_token = secrets.token_urlsafe(24)  # issued by tenant A's receiver
    registry.run("set-callback-token", TENANT_A, stdin=callback_token)
    added_b = registry.run("add", TENANT_B, "--no-signing-secret")
    listed = {tenant["tenant"]: tenant for tenant in registry.run("list")}
    problems = check_listing(listed, origins)
    if problems:
        raise RehearsalError("tenants", "the registry does not hold what was added: " + problems)
    return Credentials(
        tenant_a=TENANT_A,
        token_a=str(added_a["api_token"]),
        tenant_b=TENANT_B,
        token_b=str(added_b["api_token"]),
        callback_token=callback_token,
        signing_secret=str(added_a["signing_secret"]),
    )


def check_listing(listed: dict[str, Any], origins: list[str]) -> str:
    """What `tenants list` shows that differs from what was added ("" when nothing)."""
    if sorted(listed) != sorted([TENANT_A, TENANT_B]):
        return f"tenants {sorted(listed)}"
    tenant_a = listed[TENANT_A]
    if tenant_a.get("callback_token") is not True:
        return f"{TENANT_A} has no callback token"
    if sorted(tenant_a.get("callback_origins") or []) != sorted(origins):
        return f"{TENANT_A}'s origins are {tenant_a.get('callback_origins')}"
    for name, tenant in listed.items():
        if not any(token.get("in_force") for token in tenant.get("api_tokens") or []):
            return f"{name} has no API token in force"
    return ""
