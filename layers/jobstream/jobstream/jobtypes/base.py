"""What a job type is: its params parser, target settings and rules, stages, executor, result
rule and declaration.

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
from typing import Any, ClassVar, Final

from pydantic import BaseModel

from jobstream.config.targets import ResourceLimits, Target, TargetsFile
from jobstream.jobtypes.context import ExecutionContext
from jobstream.jobtypes.targeting import resolve_target
from jobstream.protocol.errors import Reason
from jobstream.protocol.task import ParsedParams

ResultFits = Callable[[dict[str, Any]], bool]

# The reasons a job's run fails with that another run may cure, unless the outcome says
# otherwise (a source's 404 is a remote HTTP error no retry cures).
TRANSIENT_REASONS: Final = frozenset(
    {
        Reason.RATE_LIMITED,
        Reason.REMOTE_HTTP_ERROR,
        Reason.NETWORK_ERROR,
        Reason.DOWNLOAD_TIMEOUT,
    }
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """Exactly one of `result` (succeeded) or `reason` (the internal reason it failed) is set;
    `retry_after_ms` is the wait the source asked for (its Retry-After) when it refused."""

    result: dict[str, Any] | None = None
    reason: Reason | None = None
    message: str | None = None
    # How long the source asked to be left alone (its Retry-After), when it said.
    retry_after_ms: int | None = None
    # Whether another run may succeed: None lets the reason decide (TRANSIENT_REASONS).
    transient: bool | None = None

    @property
    def retryable(self) -> bool:
        """A failure another run of the job may cure (a rate limit, a 5xx, a network error)."""
        if self.reason is None:
            return False
        return self.reason in TRANSIENT_REASONS if self.transient is None else self.transient


@dataclass(frozen=True, slots=True)
class JobRun:
    """Everything an executor is given: the stored job's identity and params, its target (None
    for a type that runs without targets), and the execution context (progress, and
    `checkpoint()` for cancel, lease loss and deadline; heartbeats run in the background)."""

    job_id: str
    tenant: str
    params: dict[str, Any]
    target: Target | None
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
    - `stages` names the stages its runs report, the first being the one a claimed job shows
      until the executor reports its own; `empty_result` is what a succeeded job shows when
      its result is not at hand.
    - `settings_model` validates the type-specific part of each target that serves the type
      (`Target.settings`) when the targets file is read; None (the default): the type runs
      without targets, and its jobs have none.
    - `builtin_resources` are the shared resources (service/resources.py) its targets may run
      against without the targets file defining them, and `default_resource` names the one a
      target that names none runs against (a `pixiv` target: `pixiv`); by default none.
    - `parse_params` validates and normalizes `Task.params`; it raises `ProtocolError`
      (`invalid_params`, HTTP 400) in the job type's own order and words.
    - `select_target` applies the target rules and returns the configured target that serves
      the job (a ProtocolError of kind invalid, not_found or conflict otherwise); by default
      the enabled target serving the type that `target_id` names, else the only one; None for a
      type without targets.
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
    stages: ClassVar[tuple[str, ...]]
    empty_result: ClassVar[Mapping[str, Any]]
    features: ClassVar[tuple[str, ...]] = ()
    limits: ClassVar[Mapping[str, int]] = MappingProxyType({})
    settings_model: ClassVar[type[BaseModel] | None] = None
    # Shared resources its targets run against without the targets file defining them.
    builtin_resources: ClassVar[Mapping[str, ResourceLimits]] = MappingProxyType({})

    def __init__(self) -> None:
        # The abstract methods are checked by ABC; class attributes are not.
        cls = type(self)
        if not getattr(cls, "name", ""):
            raise TypeError(f"{cls.__name__} must set `name` (the Task's job_type)")
        if not getattr(cls, "stages", ()):
            raise TypeError(f"{cls.__name__} must name its `stages` (the first one at least)")
        if not isinstance(getattr(cls, "empty_result", None), Mapping):
            raise TypeError(f"{cls.__name__} must set `empty_result` (a result object)")

    @property
    def first_stage(self) -> str:
        """The stage a job of this type shows once claimed."""
        return self.stages[0]

    @property
    def uses_targets(self) -> bool:
        return self.settings_model is not None

    def check_target(self, target: Target) -> BaseModel | None:
        """The target's settings validated by this type's model (ValidationError names what
        is wrong); None for a type without targets."""
        if self.settings_model is None:
            return None
        return self.settings_model.model_validate(target.settings)

    def default_resource(self, target: Target) -> str | None:
        """The shared resource a target that names none runs against; None: no limit."""
        del target
        return None

    @abstractmethod
    def parse_params(self, params: Any) -> ParsedParams: ...

    def select_target(self, params: ParsedParams, targets: TargetsFile) -> Target | None:
        if not self.uses_targets:
            return None
        return resolve_target(params, targets.enabled_for(self.name))

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
