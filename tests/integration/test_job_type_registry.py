"""The job-type registry: a throwaway type added through one package and one registration runs
end to end (admit -> worker -> events -> terminal result), and appears in capabilities and the
OpenAPI document; and no module outside a job type's own package names a job type."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel
from referencing import Registry, Resource

from jobstream.jobtypes import registry
from jobstream.jobtypes.base import JobRun, JobType, Outcome
from jobstream.protocol.task import ParsedParams
from jobstream.queue import work_message_body
from jobstream.runtime import Runtime
from tests.support.harness import Api
from tests.support.lambda_events import queue_handler
from tests.support.validation import validate, validate_error
from tests.support.word_count.definition import JOB_TYPE
from tools import openapi

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def word_count() -> Iterator[None]:
    registry.register(JOB_TYPE)
    yield
    registry.unregister(JOB_TYPE.name)


def run_worker(job_id: str) -> dict[str, Any]:
    """The worker function, invoked as SQS invokes it with the job's work message."""
    record = {"messageId": f"m-{job_id}", "receiptHandle": "r", "body": work_message_body(job_id)}
    answer: dict[str, Any] = queue_handler("WorkQueue")({"Records": [record]}, None)
    return answer


def rendered_validator(definition: str) -> Draft202012Validator:
    """A validator for `definition` in the schema `make openapi` would render right now."""
    schema = openapi.schema_document()
    registry_ = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    return Draft202012Validator(
        {"$ref": f"{schema['$id']}#/$defs/{definition}"}, registry=registry_
    )


def task(params: Any, key: str = "count-1") -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "word_count",
        "idempotency_key": key,
        "params": params,
    }


@pytest.mark.usefixtures("word_count")
def test_a_registered_type_runs_end_to_end(api: Api, rt: Runtime) -> None:
    capabilities = api.get("/capabilities").body
    validate(capabilities, "Capabilities")
    (declaration,) = [entry for entry in capabilities["job_types"] if entry["name"] == "word_count"]
    assert declaration["params_schema"] == "#/$defs/WordCountParams"
    assert declaration["result_schema"] == "#/$defs/Result_WordCount"

    submitted = api.post("/jobs", task({"text": "one two three"}))
    assert submitted.status == 202, submitted.body
    job_id = submitted.body["job"]["job_id"]
    assert submitted.body["job"]["job_type"] == "word_count"
    # The same key and params: a replay of the same job, not a second one.
    assert api.post("/jobs", task({"text": "one two three"})).status == 200

    assert run_worker(job_id) == {"batchItemFailures": []}

    job = api.get(f"/jobs/{job_id}").body
    validate(job, "Job")
    assert job["status"] == "succeeded"
    assert job["result"] == {"words": 3}
    rendered_validator("Result_WordCount").validate(job["result"])
    rendered_validator("Job").validate(job)
    events = api.get(f"/jobs/{job_id}/events").body["events"]
    for event in events:
        validate(event, "Event")
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["job.accepted", "job.started"]
    assert kinds[-1] == "job.succeeded"
    assert set(kinds[2:-1]) <= {"job.progress"}
    assert events[-1]["payload"]["result"] == {"words": 3}
    stored = rt.store.get_job(job_id)
    assert stored is not None
    # A type without targets: its job names none, whatever the targets file holds.
    assert stored.target_id == ""


@pytest.mark.usefixtures("word_count")
def test_its_params_are_validated_by_its_own_parser(api: Api, rt: Runtime) -> None:
    refused = api.post("/jobs", task({"text": ""}))
    assert refused.status == 400
    validate_error(refused.body)
    assert refused.body["error"]["code"] == "invalid_params"
    assert "params.text" in refused.body["error"]["message"]
    # Bad input writes nothing: the key is still free.
    assert api.post("/jobs", task({"text": "fine"})).status == 202
    assert rt.store.get_job(api.get("/jobs").body["jobs"][0]["job_id"]) is not None


@pytest.mark.usefixtures("word_count")
def test_the_openapi_document_and_the_schema_read_the_registry() -> None:
    bundle = openapi.bundle()
    components = bundle["components"]["schemas"]
    assert {"WordCountParams", "Result_WordCount"} <= set(components)
    branches = components["Task"]["allOf"]
    assert {
        "if": {"properties": {"job_type": {"const": "word_count"}}, "required": ["job_type"]},
        "then": {"properties": {"params": {"$ref": "#/components/schemas/WordCountParams"}}},
    } in branches
    task_validator = rendered_validator("Task")
    assert task_validator.is_valid(task({"text": "a b"}))
    assert not task_validator.is_valid(task({"words": 3}))


def test_an_unregistered_type_is_refused_naming_the_registered_ones(api: Api, rt: Runtime) -> None:
    refused = api.post("/jobs", task({"text": "a"}))
    assert refused.status == 400
    validate_error(refused.body)
    detail = refused.body["error"]["detail"]
    assert detail["reason"] == "unsupported_job_type"
    assert detail["supported"] == list(registry.names())
    assert "word_count" not in detail["supported"]


def test_a_name_cannot_be_registered_twice_or_with_unknown_features() -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(type(registry.job_types()[0])())

    class Teleport(type(JOB_TYPE)):  # type: ignore[misc]
        name = "other"
        features = ("teleport",)

    with pytest.raises(ValueError, match="unknown features"):
        registry.register(Teleport())
    assert registry.get("other") is None


def test_no_module_outside_a_job_type_package_names_a_job_type() -> None:
    """Admission, the worker, capabilities and the facade read the registry; only a type's own
    package (and its one registration line) may spell its name."""
    names = registry.names()
    package = REPOSITORY / "layers" / "jobstream" / "jobstream"
    sources = [*package.rglob("*.py"), *(REPOSITORY / "functions").rglob("*.py")]
    sources.append(REPOSITORY / "jobstream_cli" / "commands" / "submit.py")
    offenders = []
    for path in sources:
        relative = path.relative_to(REPOSITORY).as_posix()
        if any(f"jobstream/jobtypes/{name}/" in relative for name in names):
            continue
        text = path.read_text(encoding="utf-8")
        if relative.endswith("jobtypes/registry.py"):
            # The registration lines name the definitions' modules, nothing else.
            text = re.sub(r'"jobstream\.jobtypes\.\w+\.definition"', "", text)
        offenders += [f"{relative}: {name}" for name in names if re.search(rf"\b{name}\b", text)]
    assert not offenders, offenders


def test_the_job_types_doc_lists_exactly_the_registered_types() -> None:
    text = (REPOSITORY / "docs" / "job-types.md").read_text(encoding="utf-8")
    table = text.split("## What a job type is")[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert listed == list(registry.names())
    for job_type in registry.job_types():
        for schema in (job_type.params_schema, job_type.result_schema):
            assert f"`{schema.removeprefix('#/$defs/')}`" in table


def test_a_job_type_must_be_named() -> None:
    class Nameless(JobType):
        def parse_params(self, params: Any) -> ParsedParams:
            raise NotImplementedError

        def run(self, job: JobRun) -> Outcome:
            raise NotImplementedError

        def result_model(self) -> type[BaseModel]:
            raise NotImplementedError

    with pytest.raises(TypeError, match="Nameless must set `name`"):
        Nameless()
