"""Python's cyclic garbage collector, paused while a Lambda function is imported.

What importing a function allocates lives as long as the process (modules, classes, models,
botocore's data): the collector can free none of it, yet its passes over that growing heap cost
about 40 ms of a cold start, a tenth of it. So in a Lambda environment, importing the package
pauses it (jobstream/__init__.py), and the first invocation resumes it (observability.instrument),
after freezing what the import made: later passes, on every invocation, skip those objects.
Outside Lambda (the local stack, the CLI, the tests) nothing changes.
"""

from __future__ import annotations

import gc
from typing import Final

from jobstream.config.environment import variable

LAMBDA_FUNCTION_VARIABLE: Final = "AWS_LAMBDA_FUNCTION_NAME"  # set by the Lambda runtime

_paused = False


def pause_for_import() -> None:
    """Pause the collector if this is a Lambda environment and nothing else paused it."""
    global _paused  # noqa: PLW0603 - one collector per process
    if variable(LAMBDA_FUNCTION_VARIABLE).strip() and gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Freeze what exists and resume the collector, if the import paused it (once)."""
    global _paused  # noqa: PLW0603 - one collector per process
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
