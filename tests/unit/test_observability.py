"""Structured logs, EMF metrics and opt-in tracing (jobstream.observability)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jobstream import observability, recorded_code
from jobstream.runtime import Runtime
from jobstream_local.gateway import LambdaContext
from tests.support.harness import Api, Clock, canonical_task
from tests.support.lambda_events import sqs_record

REPOSITORY = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(path.name for path in (REPOSITORY / "functions").iterdir() if path.is_dir())

# The CloudWatch Embedded Metric Format specification, as a schema; the cross-references it
# states in prose (every dimension and metric named is a top-level member) are checked below.
EMF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["_aws"],
    "properties": {
        "_aws": {
            "type": "object",
            "required": ["Timestamp", "CloudWatchMetrics"],
            "properties": {
                "Timestamp": {"type": "integer", "minimum": 0},
                "CloudWatchMetrics": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["Namespace", "Dimensions", "Metrics"],
                        "additionalProperties": False,
                        "properties": {
                            "Namespace": {"type": "string", "minLength": 1, "maxLength": 1024},
                            "Dimensions": {
                                "type": "array",
                                "items": {
                                    "type": "array",
                                    "maxItems": 30,
                                    "items": {"type": "string", "minLength": 1},
                                },
                            },
                            "Metrics": {
                                "type": "array",
                                "maxItems": 100,
                                "items": {
                                    "type": "object",
                                    "required": ["Name"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "Name": {"type": "string", "minLength": 1},
                                        "Unit": {"enum": ["Count", "Milliseconds"]},
                                        "StorageResolution": {"enum": [1, 60]},
                                    },
                                },
                            },
                        },
                    },
                },
            },
        }
    },
}


def emf_problems(document: dict[str, Any]) -> list[str]:
    problems = [
        error.message for error in jsonschema.Draft7Validator(EMF_SCHEMA).iter_errors(document)
    ]
    if problems:
        return problems
    for directive in document["_aws"]["CloudWatchMetrics"]:
        for dimension_set in directive["Dimensions"]:
            problems += [
                f"dimension {name!r} is not a top-level string"
                for name in dimension_set
                if not isinstance(document.get(name), str)
            ]
        for metric in directive["Metrics"]:
            value = document.get(metric["Name"])
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > 100:
                problems.append(f"metric {metric['Name']!r} has {len(values)} values")
            problems += [
                f"metric {metric['Name']!r} value {v!r} is not a number"
                for v in values
                if isinstance(v, bool) or not isinstance(v, int | float)
            ]
    return problems


def emf_lines(out: str) -> list[dict[str, Any]]:
    documents = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    for document in documents:
        assert not emf_problems(document), (document, emf_problems(document))
    return documents


def metric_values(documents: list[dict[str, Any]]) -> dict[tuple[str, tuple[str, ...]], Any]:
    """{(metric, (dimension values besides service...)): value} over the documents."""
    found: dict[tuple[str, tuple[str, ...]], Any] = {}
    for document in documents:
        for directive in document["_aws"]["CloudWatchMetrics"]:
            dimension_set, *totals = directive["Dimensions"]
            assert dimension_set[0] == "service"
            assert totals == ([["service"]] if dimension_set[1:] else [])
            key = tuple(document[name] for name in dimension_set[1:])
            for metric in directive["Metrics"]:
                found[(metric["Name"], key)] = document[metric["Name"]]
    return found


def log_lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


@pytest.fixture
def captured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> pytest.CaptureFixture[str]:
    # As inside Lambda: outside it, nothing is written unless asked for.
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "test-function")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    observability.emf_documents()  # drop what earlier tests counted without a handler
    capsys.readouterr()
    return capsys


# ------------------------------------------------------------------------------- EMF shape


def test_emf_documents_have_the_specified_shape() -> None:
    observability.emf_documents()
    observability.count("admitted")
    observability.count("admitted")
    observability.count("rejected", dimension="invalid_params")
    observability.count("rejected", dimension="auth_error")
    observability.count("events_recorded", dimension="job.requested")
    observability.duration_ms("sweep_duration_ms", 12.5)
    observability.duration_ms("sweep_duration_ms", 7.25)
    documents = observability.emf_documents(timestamp_ms=1_700_000_000_000)
    for document in documents:
        assert not emf_problems(document), document
    # One value of `code` per document: two documents, the first with every other metric.
    first, second = documents
    plain = {
        "Namespace": "jobstream",
        "Dimensions": [["service"]],
        "Metrics": [
            {"Name": "admitted", "Unit": "Count"},
            {"Name": "sweep_duration_ms", "Unit": "Milliseconds"},
        ],
    }
    # Per code, and per stack alone: the total an alarm watches.
    by_code = {
        "Namespace": "jobstream",
        "Dimensions": [["service", "code"], ["service"]],
        "Metrics": [{"Name": "rejected", "Unit": "Count"}],
    }
    by_type = {
        "Namespace": "jobstream",
        "Dimensions": [["service", "type"], ["service"]],
        "Metrics": [{"Name": "events_recorded", "Unit": "Count"}],
    }
    assert first["_aws"] == {
        "Timestamp": 1_700_000_000_000,
        "CloudWatchMetrics": [plain, by_code, by_type],
    }
    assert (first["service"], first["admitted"], first["sweep_duration_ms"]) == (
        "jobstream",
        2,
        [12.5, 7.25],
    )
    assert (first["code"], first["rejected"]) == ("auth_error", 1)
    assert (first["type"], first["events_recorded"]) == ("job.requested", 1)
    assert second["_aws"] == {"Timestamp": 1_700_000_000_000, "CloudWatchMetrics": [by_code]}
    assert (second["code"], second["rejected"]) == ("invalid_params", 1)
    assert metric_values(documents) == {
        ("admitted", ()): 2,
        ("sweep_duration_ms", ()): [12.5, 7.25],
        ("rejected", ("auth_error",)): 1,
        ("rejected", ("invalid_params",)): 1,
        ("events_recorded", ("job.requested",)): 1,
    }
    assert observability.emf_documents() == []  # drained


def test_the_emf_check_rejects_broken_documents() -> None:
    good = {
        "_aws": {
            "Timestamp": 1,
            "CloudWatchMetrics": [
                {"Namespace": "n", "Dimensions": [["service"]], "Metrics": [{"Name": "m"}]}
            ],
        },
        "service": "s",
        "m": 1,
    }
    assert emf_problems(good) == []
    assert emf_problems({**good, "m": "1"})
    assert emf_problems({key: value for key, value in good.items() if key != "service"})
    assert emf_problems({"_aws": {"Timestamp": "now", "CloudWatchMetrics": []}})


def test_namespace_and_service_follow_the_powertools_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    observability.emf_documents()
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "acme-jobs")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "jobs-eu")
    observability.count("replayed")
    (document,) = observability.emf_documents()
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "acme-jobs"
    assert document["service"] == "jobs-eu"


def test_every_declared_metric_can_be_written() -> None:
    observability.emf_documents()
    for name, (unit, dimension) in observability.METRICS.items():
        if unit == observability.COUNT:
            observability.count(name, dimension="x" if dimension else None)
        else:
            observability.duration_ms(name, 1.0)
    documents = observability.emf_documents()
    assert {m for (m, _) in metric_values(documents)} == set(observability.METRICS)


# ------------------------------------------------------------------------------------ logs


def test_log_lines_are_json_with_the_invocation_keys(
    captured: pytest.CaptureFixture[str],
) -> None:
    def handler(event: Any, context: Any) -> str:
        logging.getLogger("jobstream.test").info("before")
        observability.bind(tenant="acme", job_id="job-1", correlation_id="chain:1", event_id=None)
        logging.getLogger("jobstream.test").warning("after %s", "bind", extra={"extra_key": 3})
        return "ok"

    wrapped = observability.instrument(handler)
    assert wrapped({}, LambdaContext("AdmissionFunction")) == "ok"
    before, after = log_lines(captured.readouterr().err)
    for line in (before, after):
        assert {"level", "message", "timestamp", "service", "function_name"} <= set(line)
        assert line["function_name"] == "AdmissionFunction"
        assert line["function_request_id"]
    assert (before["level"], before["message"]) == ("INFO", "before")
    assert "tenant" not in before
    assert (after["level"], after["message"]) == ("WARNING", "after bind")
    assert (after["tenant"], after["job_id"], after["correlation_id"]) == (
        "acme",
        "job-1",
        "chain:1",
    )
    assert after["extra_key"] == 3
    assert "event_id" not in after

    # The next invocation starts clean: nothing carries over from the last one.
    observability.instrument(lambda e, c: logging.getLogger("jobstream.x").info("next"))(
        {}, LambdaContext("AdmissionFunction")
    )
    (line,) = log_lines(captured.readouterr().err)
    assert "tenant" not in line
    assert "job_id" not in line
    assert line["cold_start"] is False


def test_concurrent_invocations_keep_their_own_log_keys(
    captured: pytest.CaptureFixture[str],
) -> None:
    # The local stack runs several functions in one process: no line may carry another's keys.
    both_bound = threading.Barrier(2)

    def handler(event: Any, context: Any) -> None:
        observability.bind(tenant=event["tenant"])
        both_bound.wait(timeout=10)
        logging.getLogger("jobstream.test").info("from %s", event["tenant"])

    invocations = [
        threading.Thread(
            target=observability.instrument(handler),
            args=({"tenant": tenant}, LambdaContext(function)),
        )
        for tenant, function in (("acme", "JobsFunction"), ("globex", "ReconcileFunction"))
    ]
    for invocation in invocations:
        invocation.start()
    for invocation in invocations:
        invocation.join(timeout=10)
    lines = {line["message"]: line for line in log_lines(captured.readouterr().err)}
    assert (lines["from acme"]["tenant"], lines["from acme"]["function_name"]) == (
        "acme",
        "JobsFunction",
    )
    assert (lines["from globex"]["tenant"], lines["from globex"]["function_name"]) == (
        "globex",
        "ReconcileFunction",
    )


def test_exceptions_are_logged_as_json_and_metrics_still_flushed(
    captured: pytest.CaptureFixture[str],
) -> None:
    def handler(event: Any, context: Any) -> None:
        observability.count("jobs_claimed")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("jobstream.service.execution").exception("executor failed")
        raise RuntimeError("escaped")

    with pytest.raises(RuntimeError):
        observability.instrument(handler)({}, LambdaContext("WorkerFunction"))
    out, err = captured.readouterr()
    (line,) = log_lines(err)
    assert line["level"] == "ERROR"
    assert line["exception_name"] == "ValueError"
    assert "boom" in line["exception"]
    assert metric_values(emf_lines(out)) == {("jobs_claimed", ()): 1}


@pytest.mark.parametrize(
    ("environment", "written"),
    [
        ({}, False),
        ({"AWS_LAMBDA_FUNCTION_NAME": "fn"}, True),
        ({"AWS_LAMBDA_FUNCTION_NAME": "fn", "POWERTOOLS_METRICS_DISABLED": "true"}, False),
        ({"POWERTOOLS_METRICS_DISABLED": "false"}, True),
    ],
)
def test_metrics_are_written_inside_lambda_or_when_asked(
    environment: dict[str, str],
    written: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_LAMBDA_FUNCTION_NAME", "POWERTOOLS_METRICS_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    observability.emf_documents()
    capsys.readouterr()
    observability.count("admitted")
    assert len(observability.flush()) == 1
    assert bool(emf_lines(capsys.readouterr().out)) is written
    assert observability.emf_documents() == []  # forgotten either way


def test_bind_without_a_handler_is_ignored(capsys: pytest.CaptureFixture[str]) -> None:
    # The CLI and direct service calls never set up logging; bind must not need it.
    observability.bind(tenant="acme")
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------- real handlers


def test_admission_emits_admitted_then_replayed(
    api: Api, captured: pytest.CaptureFixture[str]
) -> None:
    task = canonical_task(correlation_id="chain:obs")
    assert api.post("/jobs", task).status == 202
    assert metric_values(emf_lines(captured.readouterr().out)) == {
        ("admitted", ()): 1,
        ("events_recorded", ("job.requested",)): 1,
    }

    response = api.post("/jobs", task)
    assert response.status == 200
    assert metric_values(emf_lines(captured.readouterr().out)) == {("replayed", ()): 1}


def test_a_rejected_request_counts_its_code(api: Api, captured: pytest.CaptureFixture[str]) -> None:
    assert api.post("/jobs", {"protocol_version": "1"}).status == 400
    assert metric_values(emf_lines(captured.readouterr().out)) == {
        ("rejected", ("invalid_params",)): 1
    }
    assert Api(token="wrong").get("/jobs").status == 401
    assert metric_values(emf_lines(captured.readouterr().out)) == {("rejected", ("auth_error",)): 1}


def test_an_unhandled_error_is_logged_with_the_request_keys(
    api: Api, rt: Runtime, captured: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    captured.readouterr()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    monkeypatch.setattr(rt.store, "events_after", broken)
    assert api.get(f"/jobs/{job_id}/events").status == 500
    out, err = captured.readouterr()
    assert metric_values(emf_lines(out)) == {("rejected", ("internal_error",)): 1}
    (line,) = [line for line in log_lines(err) if line["message"] == "unhandled error"]
    assert line["level"] == "ERROR"
    assert line["function_name"] == "EventsFunction"
    assert line["function_request_id"]
    assert (line["tenant"], line["job_id"], line["route"]) == (
        "acme",
        job_id,
        "GET /jobs/{job_id}/events",
    )
    assert "store down" in line["exception"]


def _function(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"observability_test_{name}", REPOSITORY / "functions" / name / "app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sweep_reports_its_duration(rt: Runtime, captured: pytest.CaptureFixture[str]) -> None:
    counts = _function("reconcile").handler({}, LambdaContext("ReconcileFunction"))
    assert counts["budget_exhausted"] is False
    out, err = captured.readouterr()
    values = metric_values(emf_lines(out))
    assert list(values) == [("sweep_duration_ms", ())]
    assert values[("sweep_duration_ms", ())] >= 0
    # A sweep with nothing to do says nothing: it runs every minute.
    assert [line for line in log_lines(err) if line["message"] == "sweep finished"] == []


def test_a_sweep_that_did_something_logs_its_counts(
    api: Api, rt: Runtime, clock: Clock, captured: pytest.CaptureFixture[str]
) -> None:
    api.post("/jobs", canonical_task())
    clock.advance(rt.settings.queued_timeout_ms + 1)
    counts = _function("reconcile").handler({}, LambdaContext("ReconcileFunction"))
    assert counts["execution_timeout"] == 1  # the canonical Task's deadline comes first
    (line,) = [
        line for line in log_lines(captured.readouterr().err) if line["message"] == "sweep finished"
    ]
    assert line["sweep"] == counts
    assert line["function_name"] == "ReconcileFunction"


def test_the_worker_counts_claims_and_outcomes(
    api: Api, rt: Runtime, captured: pytest.CaptureFixture[str]
) -> None:
    job_id = api.post("/jobs", canonical_task()).body["job"]["job_id"]
    captured.readouterr()
    event = {"Records": [sqs_record(json.dumps({"job_id": job_id}))]}
    _function("worker").handler(event, LambdaContext("WorkerFunction"))
    values = metric_values(emf_lines(captured.readouterr().out))
    assert values[("jobs_claimed", ())] == 1
    assert values.get(("jobs_succeeded", ()), 0) + values.get(("jobs_failed", ()), 0) == 1
    assert values[("events_recorded", ("job.execution_started",))] == 1


# ---------------------------------------------------------------------------------- tracing


def _import_in_subprocess(function: str, environment: dict[str, str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERTOOLS_")}
    env.update(environment)
    env["PYTHONPATH"] = str(REPOSITORY / "layers" / "jobstream")
    code = (
        "import importlib.util as u, json, logging, sys\n"
        f"s = u.spec_from_file_location('app', 'functions/{function}/app.py')\n"
        "m = u.module_from_spec(s); s.loader.exec_module(m)\n"
        "imported = sorted(k for k in sys.modules if k.startswith('aws_lambda_powertools'))\n"
        # The first invocation makes the logger and (opted in) the Tracer; it may fail here for
        # want of configuration, after both are made.
        "try:\n    m.handler({}, None)\nexcept Exception:\n    pass\n"
        "print(json.dumps({'xray': sorted(k for k in sys.modules if k.startswith('aws_xray_sdk')),"
        " 'powertools_at_import': imported,"
        " 'level': logging.getLogger('jobstream').getEffectiveLevel()}))\n"
    )
    result = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=REPOSITORY,
    )
    parsed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


@pytest.mark.parametrize("function", FUNCTIONS)
def test_importing_a_function_loads_no_powertools(function: str) -> None:
    # Cold starts: the logger (and the Tracer, when opted in) are made by the first invocation.
    assert _import_in_subprocess(function, {})["powertools_at_import"] == []


@pytest.mark.parametrize("function", ["admission", "worker", "reconcile"])
def test_tracing_is_not_imported_unless_enabled(function: str) -> None:
    found = _import_in_subprocess(function, {})
    assert found["xray"] == []
    assert found["level"] == logging.INFO
    assert _import_in_subprocess(function, {"POWERTOOLS_TRACE_DISABLED": "true"})["xray"] == []


def test_tracing_opt_in_loads_the_tracer() -> None:
    found = _import_in_subprocess("admission", {"POWERTOOLS_TRACE_DISABLED": "false"})
    assert "aws_xray_sdk" in found["xray"]


def test_the_log_level_comes_from_the_powertools_variable() -> None:
    found = _import_in_subprocess("jobs", {"POWERTOOLS_LOG_LEVEL": "DEBUG"})
    assert found["level"] == logging.DEBUG
    assert _import_in_subprocess("jobs", {"LOG_LEVEL": "WARNING"})["level"] == logging.WARNING


# ------------------------------------------------------------------------ the recorded code


@pytest.mark.parametrize("unrecorded", [0, 2])
def test_the_first_invocation_frees_the_recorded_code_and_says_what_it_missed(
    captured: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    unrecorded: int,
) -> None:
    """jobstream/recorded_code.py: a text the build did not record is compiled (a slower cold
    start, which the operator is told of); after the import, the modules are as they were."""
    for module, name, builtin in ((dataclasses, "exec", exec), (typing, "compile", compile)):
        monkeypatch.setattr(module, name, builtin, raising=False)
        monkeypatch.delattr(module, name)  # whatever the test installs goes with it
    with recorded_code.recording() as codes:
        dataclasses.make_dataclass("Recorded", [("a", int)])
    recorded_code.write(codes, tmp_path / "recorded_code.bin")
    installation = recorded_code.install(tmp_path / "recorded_code.bin")
    assert installation is not None
    dataclasses.make_dataclass("Recorded", [("a", int)])
    for index in range(unrecorded):
        dataclasses.make_dataclass(f"Unrecorded{index}", [(f"field_{index}", int)])
    assert installation.recorded > 0  # texts, not classes: one per method on Python 3.11
    assert (installation.compiled > 0) is (unrecorded > 0)

    wrapped = observability.instrument(lambda event, context: "ok")
    assert wrapped({}, LambdaContext("WorkerFunction")) == "ok"
    assert "exec" not in dataclasses.__dict__
    assert "compile" not in typing.__dict__
    warnings = [
        line for line in log_lines(captured.readouterr().err) if "did not record" in line["message"]
    ]
    if unrecorded:
        (warning,) = warnings
        assert warning["level"] == "WARNING"
        assert (warning["compiled"], warning["recorded"]) == (
            installation.compiled,
            installation.recorded,
        )
        assert warning["function_name"] == "WorkerFunction"
    else:
        assert warnings == []
    wrapped({}, LambdaContext("WorkerFunction"))  # told once: the import is over
    assert not [line for line in log_lines(captured.readouterr().err) if "record" in str(line)]
