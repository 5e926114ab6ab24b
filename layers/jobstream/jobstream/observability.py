"""Structured logs, EMF metrics and opt-in tracing for every function.

- Logs: one Powertools Logger named "jobstream", so every record of a module's logger
  (`logging.getLogger(__name__)`: `jobstream.…`) comes out through it as one JSON line (on
  stderr; stdout is kept for EMF and for the CLI's own output). `bind()` adds keys (tenant,
  job_id, ...) to every later line of the invocation; `instrument()` clears them and adds the
  function name and request id. The keys belong to the thread (Powertools' thread-safe keys):
  where several invocations share a process, as in the local stack, each line carries its own
  invocation's keys.
- Metrics: counted in memory, written by `flush()` at the end of each invocation as CloudWatch
  Embedded Metric Format documents on stdout, one per dimension set. Hand-written rather than
  Powertools Metrics because several metrics carry a second dimension (code, type, reason) and
  Powertools shares one dimension set per flush. Written only inside Lambda (or when
  POWERTOOLS_METRICS_DISABLED is "false"): the local stack and the CLI keep stdout to themselves.
- Tracing: Powertools Tracer only when POWERTOOLS_TRACE_DISABLED is "false"; otherwise neither
  it nor aws_xray_sdk is ever imported (creating a Tracer costs ~0.8 s of cold start).

Nothing is configured until an instrumented handler is first invoked: services called from the
CLI or tests count metrics (never written) and bind keys (ignored) without touching any stream.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar, cast

from jobstream import collector, recorded_code
from jobstream.collector import LAMBDA_FUNCTION_VARIABLE
from jobstream.config.environment import variable

if TYPE_CHECKING:
    from aws_lambda_powertools.logging import Logger

# Powertools' own variables, shared with its Logger (so not in the settings model).
SERVICE_VARIABLE: Final = "POWERTOOLS_SERVICE_NAME"
NAMESPACE_VARIABLE: Final = "POWERTOOLS_METRICS_NAMESPACE"
TRACE_DISABLED_VARIABLE: Final = "POWERTOOLS_TRACE_DISABLED"
METRICS_DISABLED_VARIABLE: Final = "POWERTOOLS_METRICS_DISABLED"

LOGGER_NAME: Final = "jobstream"
DEFAULT_NAMESPACE: Final = "jobstream"

Handler = TypeVar("Handler", bound=Callable[..., Any])


def service_name() -> str:
    return variable(SERVICE_VARIABLE) or LOGGER_NAME


def namespace() -> str:
    return variable(NAMESPACE_VARIABLE) or DEFAULT_NAMESPACE


def metrics_enabled() -> bool:
    setting = variable(METRICS_DISABLED_VARIABLE).strip().lower()
    if setting:
        return setting not in {"true", "1"}
    return bool(variable(LAMBDA_FUNCTION_VARIABLE))


def tracing_enabled() -> bool:
    # Opt-in: unset means off, unlike Powertools' own default.
    return variable(TRACE_DISABLED_VARIABLE).strip().lower() in {"false", "0"}


# ------------------------------------------------------------------------------------ logs


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is at the time (pytest's capture swaps it per test)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


_logger: Logger | None = None
_setup_lock = threading.Lock()
_cold_start = True


def logger() -> Logger:
    """The shared Powertools Logger; created on first use (an instrumented handler's first
    invocation)."""
    global _logger  # noqa: PLW0603 - one logger per process, created lazily
    with _setup_lock:
        if _logger is None:
            # Deferred: the CLI and the tests import services without wanting any log setup.
            from aws_lambda_powertools.logging import Logger  # noqa: PLC0415

            # Named "jobstream" whatever the service is called: the modules' loggers
            # ("jobstream.http.api", ...) are its children and so come out through it.
            _logger = Logger(service=LOGGER_NAME, logger_handler=_CurrentStderr())
        return _logger


def bind(**keys: str | int | None) -> None:
    """Add keys to every later log line of this invocation; a None value removes the key."""
    if _logger is None:
        return
    present = {name: value for name, value in keys.items() if value is not None}
    absent = [name for name, value in keys.items() if value is None]
    if present:
        _logger.thread_safe_append_keys(**present)
    if absent:
        _logger.thread_safe_remove_keys(absent)


# --------------------------------------------------------------------------------- metrics

SERVICE_DIMENSION: Final = "service"
COUNT: Final = "Count"
MILLISECONDS: Final = "Milliseconds"
# A level, not a count: each value is kept (EMF's statistics over them), never summed.
LEVEL: Final = "None"
# EMF limits: at most 100 metrics per directive and 100 values per metric.
MAX_VALUES: Final = 100


class Metric(NamedTuple):
    unit: str = COUNT
    # The metric's dimension besides "service": its name (the value comes with each count).
    dimension: str | None = None


# Every metric the code emits, by its emitter.
METRICS: Final[dict[str, Metric]] = {
    # Requests and admission: http/api.py and service/admission.py.
    "admitted": Metric(),
    "replayed": Metric(),
    "rejected": Metric(dimension="code"),
    # The event stream: lifecycle/log.py, and admission for the first event of a job.
    "events_recorded": Metric(dimension="type"),
    "events_repaired": Metric(),
    # An event its commit's writer left unwritten (it died between the job's write and the
    # event's), written from the job's description: lifecycle/log.py (the next appender), a
    # page (service/events.py), the sweep (an open job's).
    "events_settled": Metric(),
    # The tenant's feed: service/feed.py (a long-poll that found nothing at first and waited).
    "feed_waits": Metric(),
    # A tenant's own redrive of its dead callbacks: service/deliveries.py.
    "callbacks_redriven": Metric(),
    # The hand-off from the table's stream to the queues: service/dispatcher.py.
    "handed_off": Metric(),
    "handoffs_failed": Metric(),
    # The worker: service/execution.py and service/completion.py.
    "jobs_claimed": Metric(),
    "jobs_succeeded": Metric(),
    "jobs_failed": Metric(),
    "results_cut": Metric(),
    "completions_deferred": Metric(),
    # Callbacks: service/callbacks.py and service/callback_batch.py.
    "callbacks_delivered": Metric(),
    "callbacks_retried": Metric(),
    "callbacks_left_to_sweep": Metric(),
    "callbacks_dead_lettered": Metric(),
    "callbacks_deferred": Metric(),
    "callbacks_waiting_for_registry": Metric(),
    "callbacks_failed": Metric(),
    "callbacks_parked": Metric(),
    "callbacks_duplicate_attempts": Metric(),
    # Callback endpoints' transitions, by tenant: service/endpoint_alerts.py.
    "endpoints_paused": Metric(dimension="tenant"),
    "endpoints_resumed": Metric(dimension="tenant"),
    "endpoints_disabled": Metric(dimension="tenant"),
    "endpoint_alerts_failed": Metric(),
    # Shared resources, by resource: service/resources.py (slots in use: a level at each change).
    "resource_slots_in_use": Metric(LEVEL, dimension="resource"),
    "resource_waits": Metric(dimension="resource"),
    "resource_backoffs": Metric(dimension="resource"),
    "resource_rate_limited": Metric(dimension="resource"),
    "resource_slots_reclaimed": Metric(dimension="resource"),
    # Runs of a job after a transient failure (by reason) or a worker that stopped.
    "job_retries": Metric(dimension="reason"),
    "jobs_rerun": Metric(),
    # The sweep: service/liveness.py and service/sweep.py.
    "verdicts": Metric(dimension="reason"),
    "sweep_duration_ms": Metric(MILLISECONDS),
    # Calls to AWS: retries.py.
    "aws_retries": Metric(dimension="code"),
    "aws_retries_exhausted": Metric(dimension="code"),
}

DimensionSet = tuple[tuple[str, str], ...]


class _Metrics:
    """Values per (dimension set, metric) until the next flush; counts are summed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[DimensionSet, dict[str, list[float]]] = {}

    def add(self, name: str, value: float, dimension: str | None = None) -> None:
        unit, dimension_name = METRICS[name]
        dimensions: DimensionSet = ()
        if dimension_name is not None:
            dimensions = ((dimension_name, str(dimension)),)
        with self._lock:
            values = self._values.setdefault(dimensions, {}).setdefault(name, [])
            if unit == COUNT and values:
                values[0] += value  # bounded however long nothing flushes (the CLI)
            elif len(values) < MAX_VALUES:
                values.append(value)

    def drain(self) -> dict[DimensionSet, dict[str, list[float]]]:
        with self._lock:
            values, self._values = self._values, {}
        return values


_metrics = _Metrics()
_properties: dict[str, str] = {}


def count(name: str, value: int = 1, *, dimension: str | None = None) -> None:
    """Count `name` (one of METRICS); `dimension` is the value of its second dimension."""
    _metrics.add(name, value, dimension)


def duration_ms(name: str, value: float) -> None:
    _metrics.add(name, round(value, 3))


def emf_documents(timestamp_ms: int | None = None) -> list[dict[str, Any]]:
    """The pending metrics as EMF documents, and forget them: one directive per dimension set,
    as few documents as the dimensions' values allow (a document holds one value of each
    dimension; every line costs its bytes in CloudWatch Logs)."""
    at = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    service = service_name()
    documents: list[dict[str, Any]] = []
    for dimensions, metrics in sorted(_metrics.drain().items()):
        names = sorted(metrics)
        directive = {
            "Namespace": namespace(),
            # A metric with a second dimension is also published per stack alone (its total):
            # what an alarm watches, whatever the code or reason.
            "Dimensions": [
                [SERVICE_DIMENSION, *(name for name, _ in dimensions)],
                *([[SERVICE_DIMENSION]] if dimensions else []),
            ],
            "Metrics": [{"Name": name, "Unit": METRICS[name].unit} for name in names],
        }
        document = _document_for(documents, dimensions, at, service)
        document["_aws"]["CloudWatchMetrics"].append(directive)
        document.update(dimensions)
        for name in names:
            values = metrics[name]
            document[name] = values[0] if len(values) == 1 else values
    return documents


def _document_for(
    documents: list[dict[str, Any]], dimensions: DimensionSet, at: int, service: str
) -> dict[str, Any]:
    """The first document that holds no value of these dimensions yet (a metric has one
    dimension set, so its name is free there too), else a new one."""
    for existing in documents:
        if not any(name in existing for name, _ in dimensions):
            return existing
    document: dict[str, Any] = {
        "_aws": {"Timestamp": at, "CloudWatchMetrics": []},
        **_properties,
        SERVICE_DIMENSION: service,
    }
    documents.append(document)
    return document


def flush() -> list[dict[str, Any]]:
    """Write the pending metrics to stdout, one EMF document per line, when metrics are
    enabled; they are forgotten either way. Returns the documents."""
    documents = emf_documents()
    if not metrics_enabled():
        return documents
    for document in documents:
        sys.stdout.write(json.dumps(document, separators=(",", ":")) + "\n")
    if documents:
        sys.stdout.flush()
    return documents


# -------------------------------------------------------------------------------- handlers


def end_import() -> recorded_code.Installation | None:
    """What a first invocation does first, the import being over: the recorded code freed
    (recorded_code.py; what it did returned), the collector resumed with what the import made
    frozen (collector.py). Later calls do nothing."""
    installation = recorded_code.uninstall()
    collector.resume()
    return installation


def instrument(handler: Handler) -> Handler:
    """Wrap a Lambda handler: fresh log keys with the function and request id, metrics
    flushed when it returns or raises, and the Tracer around it when tracing is on.

    The logger and the Tracer are made by the first invocation, not when the module is
    imported: importing a function stays cheap (its cold import is measured by `make bench`)."""

    @functools.cache
    def traced() -> Handler:
        return _traced(handler, logger()) if tracing_enabled() else handler

    @functools.wraps(handler)
    def wrapper(event: Any, context: Any) -> Any:
        global _cold_start  # noqa: PLW0603 - per process, like Lambda's own cold start
        installation = end_import()
        logger().thread_safe_clear_keys()
        function_name = getattr(context, "function_name", None) or variable(
            LAMBDA_FUNCTION_VARIABLE
        )
        request_id = getattr(context, "aws_request_id", None)
        bind(
            service=service_name(),
            function_name=function_name,
            function_request_id=request_id,
            cold_start=_cold_start,
        )
        _properties.clear()
        if function_name:
            _properties["function_name"] = function_name
        if request_id:
            _properties["function_request_id"] = request_id
        _cold_start = False
        if installation is not None and (problem := installation.problem()):
            logger().warning(
                problem,
                extra={"compiled": installation.compiled, "recorded": installation.recorded},
            )
        try:
            return traced()(event, context)
        finally:
            flush()

    return wrapper  # type: ignore[return-value]


def _traced(handler: Handler, log: Logger) -> Handler:
    try:
        # Only here: importing and creating the Tracer patches boto3 and costs ~0.8 s.
        from aws_lambda_powertools.tracing import Tracer  # noqa: PLC0415

        tracer = Tracer(service=service_name())
        traced = cast(Handler, tracer.capture_lambda_handler(handler, capture_response=False))
    except Exception:
        # No X-Ray SDK in the layer: Lambda's active tracing still records the invocation.
        log.exception("tracing requested but the Tracer is unavailable; running untraced")
        return handler
    return traced
