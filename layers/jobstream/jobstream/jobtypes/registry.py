"""The job-type registry: the one place that knows which job types this deployment runs.

Admission, the worker, capabilities, the OpenAPI bundle and the CLI ask it; nothing else names a
job type. A built-in type is one line in `BUILTIN`: the module path of its `definition`, which
holds `JOB_TYPE`. Definitions are imported on first use, so a process pays only for the
registry it reads (the executors import their own sources when they run).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from pydantic import ValidationError

from jobstream.config.settings import ConfigurationError
from jobstream.config.targets import ResourceLimits, Target, TargetsFile
from jobstream.jobtypes.base import JobType
from jobstream.protocol.documents import FEATURES
from jobstream.protocol.task import AdmissionRequest, ParsedParams
from jobstream.protocol.task import parse_task as parse_task_envelope

# The registration of every built-in job type, in the order capabilities lists them.
BUILTIN: Final = (
    "jobstream.jobtypes.candidate_search.definition",
    "jobstream.jobtypes.asset_fetch.definition",
)

_types: dict[str, JobType] = {}
_lock = threading.Lock()
_loaded = False


def register(job_type: JobType) -> JobType:
    """Add a job type; registering the same definition again is a no-op, a second definition
    under a taken name is a programming error."""
    unknown = set(job_type.features) - set(FEATURES)
    if unknown:
        raise ValueError(f"job type {job_type.name!r} declares unknown features {sorted(unknown)}")
    with _lock:
        existing = _types.get(job_type.name)
        if existing is not None and existing is not job_type:
            raise ValueError(f"job type {job_type.name!r} is already registered")
        _types[job_type.name] = job_type
    return job_type


def unregister(name: str) -> None:
    """Remove a job type (tests that register a throwaway type clean up with this)."""
    with _lock:
        _types.pop(name, None)


def _load_builtin() -> None:
    global _loaded  # noqa: PLW0603 - the registry is process state by design
    if _loaded:
        return
    for module in BUILTIN:
        definition: Any = importlib.import_module(module)
        register(definition.JOB_TYPE)
    _loaded = True


def job_types() -> tuple[JobType, ...]:
    """Every registered job type: the built-in ones first, in `BUILTIN` order."""
    _load_builtin()
    with _lock:
        return tuple(_types.values())


def get(name: str) -> JobType | None:
    _load_builtin()
    return _types.get(name)


def names() -> tuple[str, ...]:
    return tuple(job_type.name for job_type in job_types())


def first_stage(name: str) -> str:
    """The stage a claimed job of type `name` shows; a type this deployment no longer serves
    shows the protocol's plain word for running."""
    job_type = get(name)
    return job_type.first_stage if job_type is not None else "running"


def empty_result(name: str) -> Mapping[str, Any]:
    """What a succeeded job of type `name` shows when its result is not at hand."""
    job_type = get(name)
    return job_type.empty_result if job_type is not None else MappingProxyType({})


_checked: list[TargetsFile] = []


def checked_targets(targets: TargetsFile) -> TargetsFile:
    """The targets file as read (`Runtime.targets()`), once the job types have validated it
    (`check_targets`): on its first use and after each re-read, a file read once being checked
    once; ConfigurationError otherwise, like any invalid targets file."""
    with _lock:
        if _checked and _checked[0] is targets:
            return targets
    try:
        check_targets(targets)
    except ValueError as error:
        raise ConfigurationError(f"JOBSTREAM_TARGETS: {error}") from None
    with _lock:
        _checked[:] = [targets]
    return targets


def check_targets(targets: TargetsFile) -> TargetsFile:
    """The targets file, once every job type has validated the settings of the targets that
    serve it, and every job type a target names is one this deployment runs (ValueError naming
    the target otherwise)."""
    served = names()
    known_resources = resources(targets)
    for target in targets.targets:
        unknown = sorted(set(target.job_types or ()) - set(served))
        if unknown:
            raise ValueError(f"target {target.id!r} names job types not served here: {unknown}")
        if target.resource is not None and target.resource not in known_resources:
            raise ValueError(
                f"target {target.id!r} names resource {target.resource!r}, which neither the "
                f"file's resources nor a job type defines: {sorted(known_resources)}"
            )
    for job_type in job_types():
        for target in targets.targets:
            if not job_type.uses_targets or not target.serves(job_type.name):
                continue
            try:
                job_type.check_target(target)
            except ValidationError as error:
                raise ValueError(
                    f"target {target.id!r} is invalid for {job_type.name}: {error}"
                ) from None
    return targets


def builtin_resources() -> dict[str, ResourceLimits]:
    """The shared resources the job types bring, by name (the targets file may redefine one)."""
    found: dict[str, ResourceLimits] = {}
    for job_type in job_types():
        found.update(job_type.builtin_resources)
    return found


def resources(targets: TargetsFile) -> dict[str, ResourceLimits]:
    """Every shared resource a job may run against: the built-in ones, as the file sets them."""
    return {**builtin_resources(), **targets.resources}


def resources_in_use(targets: TargetsFile) -> dict[str, ResourceLimits]:
    """The resources some target runs against, and every one the file defines: what the sweep
    looks after (a built-in resource no target uses costs it nothing)."""
    known = resources(targets)
    used = {
        name
        for target in targets.targets
        for job_type in job_types()
        if job_type.uses_targets
        and target.serves(job_type.name)
        and (name := resource_name(target, job_type.name)) is not None
    }
    return {name: known[name] for name in sorted(used | set(targets.resources)) if name in known}


def resource_name(target: Target, job_type_name: str) -> str | None:
    """The shared resource jobs of `job_type_name` on `target` run against, if any."""
    job_type = get(job_type_name)
    if target.resource is not None:
        return target.resource
    return job_type.default_resource(target) if job_type is not None else None


def resource_of(
    targets: TargetsFile, job_type_name: str, target_id: str
) -> tuple[str, ResourceLimits] | None:
    """The shared resource a job runs against and its limits; None when it runs unlimited (no
    resource, or its target is gone: the run then fails on that)."""
    target = next((target for target in targets.targets if target.id == target_id), None)
    if target is None:
        return None
    name = resource_name(target, job_type_name)
    if name is None:
        return None
    limits = resources(targets).get(name)
    return (name, limits) if limits is not None else None


def parse_task(body: Any) -> tuple[AdmissionRequest, JobType]:
    """A Task validated in the reference order: the envelope, then its job type's params."""
    registered = {job_type.name: job_type for job_type in job_types()}
    request = parse_task_envelope(body, {name: t.parse_params for name, t in registered.items()})
    return request, registered[request.job_type]


__all__ = [
    "JobType",
    "ParsedParams",
    "builtin_resources",
    "check_targets",
    "checked_targets",
    "empty_result",
    "first_stage",
    "get",
    "job_types",
    "names",
    "parse_task",
    "register",
    "resource_name",
    "resource_of",
    "resources",
    "resources_in_use",
]
