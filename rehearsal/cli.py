"""The project's own CLI (`python -m jobstream_cli`), run as an operator or a consumer runs it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from rehearsal.toolchain import DEV_PYTHON, REPOSITORY, clean_environment

TIMEOUT_S = 900
# The layer, the dev packages and the consumer SDK / conformance kit, as `make setup` adds them.
PYTHONPATH = os.pathsep.join(
    str(path)
    for path in (REPOSITORY / "layers" / "jobstream", REPOSITORY, REPOSITORY / "clients" / "python")
)


def run_cli(
    arguments: list[str],
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    log: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`jobstream ARGUMENTS` in a clean environment plus `env`; its output also goes to `log`."""
    result = subprocess.run(  # noqa: S603 - our own CLI
        [str(DEV_PYTHON), "-m", "jobstream_cli", *arguments],
        cwd=REPOSITORY,
        env=clean_environment({**(env or {}), "PYTHONPATH": PYTHONPATH}),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if log is not None:
        log.write_text(result.stdout + result.stderr, encoding="utf-8")
    return result
