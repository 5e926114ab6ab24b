"""What the rehearsal derives from template.yaml: the template it builds, the parameters it
passes, the runtime it needs. Nothing here names a resource: names come from the template."""

from __future__ import annotations

import copy
import platform
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rehearsal.toolchain import RehearsalError

FUNCTION = "AWS::Serverless::Function"
LAYER = "AWS::Serverless::LayerVersion"
SECRET_TYPE = "AWS::SecretsManager::Secret"  # noqa: S105 - a resource type
# Where the functions read the consumer registry from on AWS: a secret the template creates.
REGISTRY_VARIABLE = "JOBSTREAM_TENANTS_SECRET"
MACHINE_ARCHITECTURES = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "arm64",
    "arm64": "arm64",
}
PYTHON_RUNTIME = re.compile(r"^python(\d+\.\d+)$")


@dataclass(frozen=True)
class Credentials:
    """One rehearsal's two tenants as the registry issued them (API tokens, signing secret), and
    the bearer token tenant A's receiver issued for its callbacks."""

    tenant_a: str
    token_a: str
    tenant_b: str
    token_b: str
    callback_token: str
    signing_secret: str


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


def for_runtime(document: dict[str, Any], version: str) -> tuple[dict[str, Any], list[str]]:
    """A copy of the template whose functions and layers run Python `version`, and what changed.

    Shim, where this machine lacks the template's Python: the rehearsal's Lambda runtime is a
    virtualenv of the Python it has; the functions and the layers' bytecode are built for that
    version, and `build_parity` checks the template's own build holds the same packages.
    """
    rewritten = copy.deepcopy(document)
    wanted = f"python{version}"
    changes: list[str] = []
    places = [(_globals(rewritten), "Runtime")] + [
        (resource.get("Properties") or {}, key)
        for resource in rewritten["Resources"].values()
        if resource["Type"] in (FUNCTION, LAYER)
        for key in ("Runtime", "CompatibleRuntimes")
    ]
    for mapping, key in places:
        value = mapping.get(key)
        if value is None:
            continue
        replacement: Any = [wanted] if isinstance(value, list) else wanted
        if value != replacement:
            mapping[key] = replacement
            changes.append(f"{key} {value} -> {replacement}")
    return rewritten, sorted(set(changes))


def layer_build_environment(document: dict[str, Any]) -> dict[str, str]:
    """What a layer's own Makefile (`BuildMethod: makefile`) needs to build for the template's
    architecture and Python: sam hands a Makefile neither, so it reads LAYER_ARCHITECTURE and
    LAYER_PYTHON_VERSION."""
    wanted = {
        str((resource.get("Metadata") or {}).get("BuildArchitecture"))
        for resource in document["Resources"].values()
        if resource["Type"] == LAYER
        and (resource.get("Metadata") or {}).get("BuildMethod") == "makefile"
    }
    if not wanted:
        return {}
    if len(wanted) != 1:
        raise RehearsalError("plan", f"layers built for several architectures: {sorted(wanted)}")
    return {"LAYER_ARCHITECTURE": wanted.pop(), "LAYER_PYTHON_VERSION": python_version(document)}


def _environments(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The environment variables of Globals and of every function."""
    environments = [_globals(document).get("Environment")] + [
        props.get("Environment") for props in functions(document).values()
    ]
    for environment in environments:
        yield (environment or {}).get("Variables") or {}


def registry_secret(document: dict[str, Any]) -> str:
    """The logical id of the secret the template creates and hands the functions as their
    consumer registry (by the variable the code reads, never by a resource name)."""
    resources = document["Resources"]
    found = {
        reference
        for variables in _environments(document)
        for name, value in variables.items()
        if name == REGISTRY_VARIABLE
        for reference in _references(value)
        if resources.get(reference, {}).get("Type") == SECRET_TYPE
    }
    if len(found) != 1:
        raise RehearsalError(
            "plan",
            f"expected one {SECRET_TYPE} of the template to feed {REGISTRY_VARIABLE}, found "
            f"{sorted(found)}: the rehearsal cannot add its tenants the way an operator does "
            "(teach rehearsal.tenants the new way)",
        )
    return str(found.pop())


def _references(value: Any) -> list[str]:
    """What a value names by Ref, on either side of an Fn::If (a secret created or adopted)."""
    if isinstance(value, dict) and isinstance(value.get("Ref"), str):
        return [value["Ref"]]
    if isinstance(value, dict) and isinstance(value.get("Fn::If"), list):
        return [ref for branch in value["Fn::If"][1:] for ref in _references(branch)]
    return []


def parameter_overrides(document: dict[str, Any]) -> dict[str, str]:
    """The parameters to deploy with: none. No parameter carries a secret (the tenants are
    written into the deployed registry afterwards, as an operator does), so every parameter keeps
    its default; one without a default stops the rehearsal by name."""
    missing = [
        name for name, spec in (document.get("Parameters") or {}).items() if "Default" not in spec
    ]
    if missing:
        raise RehearsalError(
            "plan", f"parameters without a default the rehearsal has no value for: {missing}"
        )
    return {}
