"""What the rehearsal derives from template.yaml: the template it builds, the parameters it
passes, the runtime it needs. Nothing here names a resource: names come from the template."""

from __future__ import annotations

import base64
import copy
import platform
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rehearsal.toolchain import RehearsalError

FUNCTION = "AWS::Serverless::Function"
LAYER = "AWS::Serverless::LayerVersion"
# The settings the rehearsal must control, by the environment variable the code reads.
TOKENS_VARIABLE = "JOBSTREAM_API_TOKENS"
CALLBACK_TOKEN_VARIABLE = "JOBSTREAM_CALLBACK_TOKEN"  # noqa: S105 - a variable's name
SIGNING_SECRET_VARIABLE = "JOBSTREAM_CALLBACK_SIGNING_SECRET"  # noqa: S105 - a variable's name
# The callback receiver is plain http on 127.0.0.1: the SSRF guard must let it through.
ALLOW_VARIABLES = ("JOBSTREAM_CALLBACK_ALLOW_HTTP", "JOBSTREAM_CALLBACK_ALLOW_PRIVATE")
MACHINE_ARCHITECTURES = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "arm64",
    "arm64": "arm64",
}
PYTHON_RUNTIME = re.compile(r"^python(\d+\.\d+)$")


@dataclass(frozen=True)
class Credentials:
    """Fresh secrets for one rehearsal: two tenants' tokens and the callback credentials."""

    tenant_a: str
    token_a: str
    tenant_b: str
    token_b: str
    callback_token: str
    signing_secret: str

    @classmethod
    def generate(cls) -> Credentials:
        key = base64.b64encode(secrets.token_bytes(24)).decode("ascii")
        return cls(
            tenant_a="rehearsal-a",
            token_a=secrets.token_urlsafe(24),
            tenant_b="rehearsal-b",
            token_b=secrets.token_urlsafe(24),
            callback_token=secrets.token_urlsafe(24),
            signing_secret=f"whsec_{key}",
        )

    @property
    def api_tokens(self) -> str:
        return f"{self.tenant_a}={self.token_a},{self.tenant_b}={self.token_b}"


def host_architecture() -> str:
    machine = platform.machine().lower()
    if machine not in MACHINE_ARCHITECTURES:
        raise RehearsalError("plan", f"no Lambda architecture runs on this machine ({machine})")
    return MACHINE_ARCHITECTURES[machine]


def functions(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: resource.get("Properties", {})
        for name, resource in document["Resources"].items()
        if resource["Type"] == FUNCTION
    }


def _globals(document: dict[str, Any]) -> dict[str, Any]:
    function_globals: dict[str, Any] = (document.get("Globals") or {}).get("Function") or {}
    return function_globals


def runtimes(document: dict[str, Any]) -> set[str]:
    default = _globals(document).get("Runtime")
    return {str(props.get("Runtime", default)) for props in functions(document).values()}


def python_version(document: dict[str, Any]) -> str:
    """The one Python version every function runs on (the rehearsal has one Lambda runtime)."""
    found = runtimes(document)
    versions = {m.group(1) for r in found if (m := PYTHON_RUNTIME.match(r))}
    if len(versions) != 1 or len(found) != 1:
        raise RehearsalError("plan", f"expected one python3.x runtime for all functions: {found}")
    return versions.pop()


def _architecture_lists(document: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every place a SAM template names an architecture: (mapping, key)."""
    yield _globals(document), "Architectures"
    for resource in document["Resources"].values():
        if resource["Type"] in (FUNCTION, LAYER):
            properties = resource.get("Properties") or {}
            yield properties, "Architectures"
            yield properties, "CompatibleArchitectures"
            yield resource.get("Metadata") or {}, "BuildArchitecture"


def for_architecture(
    document: dict[str, Any], architecture: str
) -> tuple[dict[str, Any], list[str]]:
    """A copy of the template built for `architecture`, and what was changed.

    Shim: Lambda runs the template's arm64 build on Graviton; this machine can only load wheels
    of its own architecture (pydantic-core is compiled), so the rehearsal deploys the same
    template built for the host. `build_parity` checks both builds hold the same packages.
    """
    rewritten = copy.deepcopy(document)
    changes: list[str] = []
    for mapping, key in _architecture_lists(rewritten):
        value = mapping.get(key)
        if value is None:
            continue
        wanted: Any = [architecture] if isinstance(value, list) else architecture
        if value != wanted:
            mapping[key] = wanted
            changes.append(f"{key} {value} -> {wanted}")
    return rewritten, sorted(set(changes))


def _parameter_references(document: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(environment variable, parameter) for every variable a function's environment takes
    straight from a template parameter."""
    parameters = document.get("Parameters") or {}
    environments = [_globals(document).get("Environment")] + [
        props.get("Environment") for props in functions(document).values()
    ]
    for environment in environments:
        variables = (environment or {}).get("Variables") or {}
        for name, value in variables.items():
            if isinstance(value, dict) and value.get("Ref") in parameters:
                yield name, value["Ref"]


def parameter_overrides(document: dict[str, Any], credentials: Credentials) -> dict[str, str]:
    """The parameters to deploy with: the rehearsal's secrets and the receiver's allowances where
    the template feeds them from parameters; every other parameter keeps its default."""
    wanted = {
        TOKENS_VARIABLE: credentials.api_tokens,
        CALLBACK_TOKEN_VARIABLE: credentials.callback_token,
        SIGNING_SECRET_VARIABLE: credentials.signing_secret,
        **dict.fromkeys(ALLOW_VARIABLES, "true"),
    }
    overrides: dict[str, str] = {}
    for variable, parameter in _parameter_references(document):
        if variable in wanted:
            overrides[parameter] = wanted[variable]
    if not any(variable == TOKENS_VARIABLE for variable, _ in _parameter_references(document)):
        raise RehearsalError(
            "plan",
            f"no template parameter feeds {TOKENS_VARIABLE}: the rehearsal cannot give the API "
            "tokens it knows (teach rehearsal.plan.parameter_overrides the new way)",
        )
    missing = [
        name
        for name, spec in (document.get("Parameters") or {}).items()
        if "Default" not in spec and name not in overrides
    ]
    if missing:
        raise RehearsalError(
            "plan", f"parameters without a default the rehearsal has no value for: {missing}"
        )
    return overrides
