"""The scheduled handler shell: no input, one service call, its report out. The sweep (the
reconcile function) goes through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from jobstream import deadline, observability
from jobstream import runtime as runtime_module
from jobstream.runtime import Runtime

Report = TypeVar("Report")


def schedule_handler(service: Callable[[Runtime], Report]) -> Callable[[Any, Any], Report]:
    """A Lambda handler for a schedule: the scheduler's event says nothing the service needs."""

    def handler(_event: Any, _context: Any) -> Report:
        return service(runtime_module.runtime())

    # Log keys reset and metrics flushed per invocation, as for every function; the service's
    # AWS calls start only with the time to end before the function's timeout (retries.py).
    return observability.instrument(deadline.within_invocation(handler))
