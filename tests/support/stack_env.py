"""The environment a black-box test starts `python -m jobstream_local` with."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def stack_environment(**extra: str) -> dict[str, str]:
    """This process's environment without AWS or jobstream settings, on a free port, and with a
    local-env file of its own: a test stack never overwrites (nor, when it stops, removes) the one
    a developer's `make run` left for the CLI, nor another test stack's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSTREAM_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPOSITORY / "layers" / "jobstream"), str(REPOSITORY)])
    env["JOBSTREAM_PORT"] = "0"
    env["JOBSTREAM_LOCAL_ENV_FILE"] = str(
        Path(tempfile.mkdtemp(prefix="jobstream-stack-")) / "local-env.json"
    )
    env.update(extra)
    return env
