"""`sam build` and `sam deploy`, exactly as an operator runs them, pointed at the emulator."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rehearsal.plan import layer_build_environment
from rehearsal.toolchain import (
    REGION,
    REPOSITORY,
    SAM,
    RehearsalError,
    aws_environment,
    clean_environment,
    require,
    run_tool,
)

# The project's own SAM settings (capabilities, managed artifact bucket, build cache), found by
# path: SAM looks for its config next to the template, and these templates are generated.
SAM_CONFIG = REPOSITORY / "samconfig.toml"
SAM_SETUP = "run `make rehearse` (it sets up the SAM CLI in .venv-sam)"


def build(template: dict[str, Any], work_dir: Path, name: str) -> Path:
    """`sam build` of `template` (written as JSON in `work_dir/name`); returns the build dir.

    Paths in the template stay relative to the repository (`--base-dir`), as in template.yaml.
    Each build runs in its own directory, with its own build.toml, cache and dependency folders
    (sam keeps these under the working directory and deletes the ones its last build did not
    use): samconfig.toml turns the cache on, and one architecture must not evict the other's.
    """
    require(SAM, SAM_SETUP)
    home = work_dir / name
    home.mkdir(parents=True, exist_ok=True)
    source = home / "template.json"
    source.write_text(json.dumps(template, indent=1), encoding="utf-8")
    build_dir = home / "build"
    command: list[str | Path] = [
        SAM, "build",
        "--template-file", source,
        "--base-dir", REPOSITORY,
        "--build-dir", build_dir,
        "--cache-dir", home / "cache",
        "--config-file", SAM_CONFIG,
    ]  # fmt: skip
    run_tool(
        f"sam build ({name})",
        command,
        clean_environment({"SAM_CLI_TELEMETRY": "0", **layer_build_environment(template)}),
        home / "sam-build.log",
        cwd=home,
    )
    return build_dir


def distributions(build_dir: Path) -> dict[str, set[str]]:
    """Per layer of a build, the installed distributions (name-version from dist-info)."""
    found: dict[str, set[str]] = {}
    for layer in sorted(p for p in build_dir.iterdir() if (p / "python").is_dir()):
        found[layer.name] = {
            info.name.removesuffix(".dist-info").lower()
            for info in (layer / "python").glob("*.dist-info")
        }
    return found


def build_parity(host_build: Path, target_build: Path) -> list[str]:
    """Differences between the host-architecture build the rehearsal runs and the build for the
    template's own architecture: every layer must hold the same distributions, same versions."""
    host, target = distributions(host_build), distributions(target_build)
    problems = []
    for layer in sorted(set(host) | set(target)):
        only_host = sorted(host.get(layer, set()) - target.get(layer, set()))
        only_target = sorted(target.get(layer, set()) - host.get(layer, set()))
        if only_host or only_target:
            problems.append(
                f"layer {layer}: only in the rehearsed build {only_host}, "
                f"only in the template's build {only_target}"
            )
    return problems


def deploy(
    built_template: Path, stack_name: str, overrides: Mapping[str, str], endpoint: str, log: Path
) -> float:
    """`sam deploy` of the built template with the repository's samconfig.toml (capabilities,
    managed artifact bucket), to the emulator. Returns seconds taken."""
    require(SAM, SAM_SETUP)
    command: list[str | Path] = [
        SAM, "deploy",
        "--template-file", built_template,
        "--config-file", SAM_CONFIG,
        "--stack-name", stack_name,
        "--region", REGION,
        "--no-confirm-changeset",
        "--no-fail-on-empty-changeset",
    ]  # fmt: skip
    if overrides:  # sam refuses the option without a value
        command += [
            "--parameter-overrides",
            *(f"{name}={value}" for name, value in sorted(overrides.items())),
        ]
    try:
        return run_tool("sam deploy", command, aws_environment(endpoint), log)
    except RehearsalError as failure:
        # The values are this run's secrets: never print them with the command's output.
        message = failure.message
        for value in overrides.values():
            message = message.replace(value, "***") if len(value) > 8 else message
        raise RehearsalError(failure.step, message) from None
