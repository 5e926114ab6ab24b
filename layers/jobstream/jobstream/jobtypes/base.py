"""What a job type is: its params parser, target rules, executor, result rule and declaration.

A job type is one package whose `JobType` subclass is registered once (`registry.py`). Nothing
outside a job type's package names it: admission, the worker, capabilities, the OpenAPI document
and the CLI read the registry.
"""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import BaseModel

from jobstream.config.targets import Target, TargetsFile
from jobstream.jobtypes.context import ExecutionContext
from jobstream.jobtypes.targeting import resolve_target
from jobstream.protocol.errors import Reason
from jobstream.protocol.task import ParsedParams

ResultFits = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class Outcome:
    """Exactly one of `result` (succeeded) or `reason` (the internal reason it failed) is set."""

    result: dict[str, Any] | None = None
    reason: Reason | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class JobRun:
    """Everything an executor is given: the stored job's identity and params, its target, and
    the execution context (progress, and `checkpoint()` for cancel, lease loss and deadline;
    heartbeats run in the background)."""

    job_id: str
    tenant: str
    params: dict[str, Any]
    target: Target
    context: ExecutionContext


@dataclass(frozen=True, slots=True)
class ResultSummary:
    """A result told to a person (the CLI): one line of what it holds, then one line per thing
    in it worth following (a candidate's URL, a fetched file)."""

    headline: str
    items: tuple[str, ...] = ()


def summarize_any_result(result: Mapping[str, Any]) -> ResultSummary:
    """What any result holds, by its keys: the default of a job type without its own words,
    and what the CLI says of a type this deployment does not know."""
    parts = [
        f"{len(value)} {name}" if isinstance(value, list) else f"{name} {value}"
        for name, value in result.items()
        if isinstance(value, list | str | int | float)
    ]
    return ResultSummary(", ".join(parts) or "an empty result")


def keep_whole_result(result: dict[str, Any], fits: ResultFits) -> dict[str, Any] | None:
    """The default rule for a result larger than the job item holds: no cut, the job fails."""
    return result if fits(result) else None


class JobType(ABC):
    """One kind of work: a subclass per type, registered as one instance (`JOB_TYPE`).

    - `name` is the Task's `job_type`; `features` and `limits` are its capabilities entry.
    - `parse_params` validates and normalizes `Task.params`; it raises `ProtocolError`
      (`invalid_params`, HTTP 400) in the job type's own order and words.
    - `select_target` applies the target rules and returns the configured target that serves
      the job (a ProtocolError of kind invalid, not_found or conflict otherwise); by default
      the target `target_id` names, else the only enabled one.
    - `run` executes a job (see `JobRun`); JobInterruptedError from `checkpoint()` propagates.
      Heavy clients are imported inside it, so admission never pays for them.
    - `result_model()` returns the model every result is checked against before it is recorded
      (a mismatch is internal_error); a method, so admission never imports the model.
    - `fit_result` cuts a result larger than the job item holds, or returns None (the job
      fails, the default).
    - `summarize_result` tells a result to a person (the CLI's job and event views); by
      default, what its keys hold.
    - `home` is the directory of the type's package: its `schema.json` holds the JSON Schema
      `$defs` the type contributes to schemas/ and the OpenAPI document (`schemas`, read by
      the build's `tools/openapi.py` only); two of them, named after the type, are its params
      and result schemas (`params_schema`, `result_schema`: `word_count` has `WordCountParams`,
      `Result_WordCount`).
    """

    name: ClassVar[str]
    features: ClassVar[tuple[str, ...]] = ()
    limits: ClassVar[Mapping[str, int]] = MappingProxyType({})

    def __init__(self) -> None:
        # The abstract methods are checked by ABC; a class attribute is not.
        if not getattr(type(self), "name", ""):
            raise TypeError(f"{type(self).__name__} must set `name` (the Task's job_type)")

    @abstractmethod
    def parse_params(self, params: Any) -> ParsedParams: ...

    def select_target(self, params: ParsedParams, targets: TargetsFile) -> Target:
        return resolve_target(params, targets)

    @abstractmethod
    def run(self, job: JobRun) -> Outcome: ...

    @abstractmethod
    def result_model(self) -> type[BaseModel]: ...

    def fit_result(self, result: dict[str, Any], fits: ResultFits) -> dict[str, Any] | None:
        return keep_whole_result(result, fits)

    def summarize_result(self, result: Mapping[str, Any]) -> ResultSummary:
        return summarize_any_result(result)

    @property
    def home(self) -> Path:
        module_file = sys.modules[type(self).__module__].__file__
        if module_file is None:
            raise RuntimeError(f"job type {self.name!r} is not defined in a file")
        return Path(module_file).parent

    @property
    def schemas(self) -> dict[str, dict[str, Any]]:
        """The `$defs` of the type's `schema.json` (read on demand: the runtime needs none)."""
        defs: dict[str, dict[str, Any]] = json.loads(
            (self.home / "schema.json").read_text(encoding="utf-8")
        )
        return defs

    @property
    def params_schema(self) -> str:
        return f"#/$defs/{_camel(self.name)}Params"

    @property
    def result_schema(self) -> str:
        return f"#/$defs/Result_{_camel(self.name)}"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))
