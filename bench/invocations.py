"""What each Lambda invocation of a job's life does, measured in-process (bench.cost).

Every invocation runs inside `observability.instrument`, the wrapper every function's handler
has, with metrics on as inside Lambda, at the template's log level (none set: Powertools'
INFO): the bytes it writes to stdout (EMF metrics) and stderr (JSON log lines) are what
CloudWatch Logs would ingest of it. Its own compute is its CPU time less the time spent inside
AWS calls (the client's `_make_api_call`, hooks and moto included) and less the invocations it
set off (the dispatcher runs after each commit, inside the commit's call here): what Lambda
bills beside the waits for AWS, which the bill adds per call (bench.assumptions). Times are
the thread's CPU time (`time.thread_time`), not the wall clock: what else loads the machine
does not count (waits do not either: there are none but the AWS calls).
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

Result = TypeVar("Result")


@dataclass
class Invocation:
    function: str  # the template's logical id
    calls: int = 0
    own_s: float = 0.0  # CPU time less AWS calls and nested invocations
    log_bytes: int = 0
    log_events: int = 0
    log_events_untimed: int = 0  # JSON lines without a timestamp (EMF): Lambda may add one
    reads_registry: bool = False
    # What it sends out to the internet: the HTTP response's body, or the callback's.
    egress_bytes: int = 0
    _aws_s: float = 0.0
    _nested_s: float = 0.0


class _CountingStream(io.TextIOBase):
    """Counts what is written (bytes, lines) into the innermost invocation."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def write(self, text: str) -> int:
        current = self._recorder.current
        if current is not None:
            current.log_bytes += len(text.encode("utf-8"))
            current.log_events += text.count("\n")
        for line in text.splitlines():
            if line.startswith('{"_aws"'):
                document = json.loads(line)
                self._recorder.metric_series(document)
                if current is not None and "timestamp" not in document:
                    current.log_events_untimed += 1
        return len(text)


Series = tuple[str, tuple[tuple[str, str], ...]]


def series_of(document: dict[str, Any]) -> set[Series]:
    """The CloudWatch metrics (name and dimension values) an EMF document defines: each is a
    custom metric, billed for every hour it receives a value."""
    found = set()
    for directive in document["_aws"]["CloudWatchMetrics"]:
        for dimensions in directive["Dimensions"]:
            values = tuple((name, str(document[name])) for name in dimensions)
            for metric in directive["Metrics"]:
                found.add((metric["Name"], values))
    return found


@dataclass
class Recorder:
    invocations: list[Invocation] = field(default_factory=list)
    # Every CloudWatch metric the EMF documents written so far define (name and dimensions).
    series: set[Series] = field(default_factory=set)
    _stack: list[Invocation] = field(default_factory=list)

    @property
    def current(self) -> Invocation | None:
        return self._stack[-1] if self._stack else None

    def reset(self) -> None:
        self.invocations.clear()
        self.series.clear()

    def run(self, function: str, action: Callable[[], Result]) -> Result:
        """`action` as one invocation of `function` (the handler's wrapper around it)."""
        from jobstream import observability

        invocation = Invocation(function)
        outcome: list[Result] = []

        def handler(_event: Any, _context: Any) -> None:
            outcome.append(action())

        context = _Context(function, f"bench-{len(self.invocations)}")
        self._stack.append(invocation)
        started = time.thread_time()
        try:
            observability.instrument(handler)(None, context)
        finally:
            elapsed = time.thread_time() - started
            self._stack.pop()
            invocation.own_s = elapsed - invocation._aws_s - invocation._nested_s
            if self._stack:
                self._stack[-1]._nested_s += elapsed
            self.invocations.append(invocation)
        return outcome[0]

    def timed_client(self, client: Any) -> None:
        """Time every call of `client` (a boto3 client, or the store's retrying wrapper around
        one) against the invocation making it."""
        inner = getattr(client, "_client", client)
        original = inner._make_api_call

        def timed(operation: str, params: Any) -> Any:
            started = time.thread_time()
            try:
                return original(operation, params)
            finally:
                current = self.current
                if current is not None:
                    current.calls += 1
                    current._aws_s += time.thread_time() - started

        inner._make_api_call = timed

    def metric_series(self, document: dict[str, Any]) -> None:
        self.series.update(series_of(document))

    def registry_read(self) -> None:
        """The invocation asked for the consumer registry (on AWS: a secret read when cold)."""
        if self.current is not None:
            self.current.reads_registry = True

    def egress(self, size: int) -> None:
        if self.current is not None:
            self.current.egress_bytes += size

    @contextmanager
    def capturing(self) -> Iterator[None]:
        """Metrics on (as inside Lambda); stdout and stderr counted, not shown."""
        import os

        from jobstream import observability

        previous = os.environ.get(observability.METRICS_DISABLED_VARIABLE)
        os.environ[observability.METRICS_DISABLED_VARIABLE] = "false"
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = _CountingStream(self)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = stdout, stderr
            if previous is None:
                os.environ.pop(observability.METRICS_DISABLED_VARIABLE, None)
            else:
                os.environ[observability.METRICS_DISABLED_VARIABLE] = previous


@dataclass(frozen=True)
class _Context:
    function_name: str
    aws_request_id: str
