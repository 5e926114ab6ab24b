"""The stack tests' targets and environment (`jobstream_local.child` starts the stack)."""

from __future__ import annotations

import tempfile

from jobstream_local.child import REPOSITORY, child_environment

__all__ = ["REPOSITORY", "TARGETS", "environment"]

# The stack tests' targets: one quick, one slow.
TARGETS = {
    "account": "default",
    "targets": [
        {
            "id": "demo-illustration",
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["landscape"]},
        },
        {
            # Slow on purpose (a pause per work scanned): cancel reliably finds it running.
            "id": "slow-illustration",
            "work_type": "illustration",
            "source": "catalog",
            "query": {"tags": ["landscape"]},
            "limit": 60,
            "scan_limit": 60,
            "scan_delay_ms": 500,
        },
    ],
}


def environment(**extra: str) -> dict[str, str]:
    """A stack's environment (`child_environment`) with a local-env directory of its own: a test
    stack is never among the stacks a developer's `jobstream --local` chooses from, and the CLI
    run with this environment finds that stack only."""
    local_env_dir = tempfile.mkdtemp(prefix="jobstream-stack-")
    return child_environment(JOBSTREAM_LOCAL_ENV_DIR=local_env_dir, **extra)
