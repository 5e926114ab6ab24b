"""Imports go downward: each unit of the layer imports only the units below it
(docs/architecture.md, "Layering"), and the functions only the handler shells and the services.
Read with `ast`, nothing is imported: a deferred import inside a function counts too."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
PACKAGE = REPOSITORY / "layers" / "jobstream" / "jobstream"
FUNCTIONS = REPOSITORY / "functions"

# Plain data and pure helpers, importing nothing of the layer (observability: its variables).
BASE = frozenset(
    {
        "clock",
        "deadline",
        "domain",
        "tenant_names",
        "backoff",
        "observability",
        "errors",
        "config.environment",
        "collector",  # the garbage collector during a cold start
        "recorded_code",  # the code the layer's build compiled for the import
    }
)
# The one reader of the process environment besides the settings (config/environment.py): the
# standard library only, so it sits with the base units whatever unit reads it.
ENVIRONMENT_READER = "jobstream.config.environment"
# Each unit (a package of the layer, or a module at its top) and the units directly below it. A
# unit may import every unit below it, directly or through others, and nothing else. Units that
# are not below one another are independent: the store knows no protocol words and no queue,
# the queue no store, the protocol facade no configuration.
DIRECTLY_BELOW: Mapping[str, frozenset[str]] = {
    **{unit: frozenset() for unit in BASE},
    # The package itself: importing it pauses the collector and installs the recorded code.
    "": frozenset({"collector", "recorded_code"}),
    # Powertools' variables; the import's end.
    "observability": frozenset({"config.environment", "collector", "recorded_code"}),
    "collector": frozenset({"config.environment"}),  # Lambda's variable
    "protocol": BASE,  # the pure facade: documents, validation, errors, event kinds
    "retries": BASE,  # which AWS failures are transient, and retrying them
    # botocore's data, read for the services of our clients (botocore only).
    "botocore_data": frozenset(),
    "aws": frozenset({"retries", "botocore_data"}),  # the AWS clients, from botocore's session
    # Outbound URLs: parsing, origin patterns, the IANA table, resolve-and-pin, pinned HTTP.
    "outbound": BASE,
    "config": frozenset({"aws", "outbound"}),  # settings, targets, the consumer registry
    "store": frozenset({"config"}),  # the only DynamoDB user
    "queue": frozenset({"config"}),  # SQS
    "alerts_topic": frozenset({"config"}),  # SNS: the operator's endpoint alerts
    "delivery": frozenset({"config"}),  # callback POSTs: signing, classification
    "jobtypes": frozenset({"protocol", "config"}),  # what each job type does
    # The composition root: settings, the store, the queues, a clock and the poster, built once.
    "runtime": frozenset({"store", "queue", "alerts_topic", "delivery"}),
    "lifecycle": frozenset({"runtime", "protocol"}),  # the moves of a job and its event log
    "service": frozenset({"lifecycle", "jobtypes"}),  # one function per operation
    "http": frozenset({"service"}),  # the HTTP API's handler shell
    "sqs_handler": frozenset({"service"}),  # the SQS triggers' handler shell
    # The DynamoDB Streams trigger's shell: the same partial batch response as SQS.
    "stream_handler": frozenset({"sqs_handler"}),
    "schedule_handler": frozenset({"service"}),  # the scheduled function's shell
}
# What functions/*/app.py may import of the layer: handlers are thin.
FUNCTION_IMPORTS = frozenset(
    {
        "http",
        "sqs_handler",
        "stream_handler",
        "schedule_handler",
        "service",
        "runtime",
        "observability",
    }
)
# The units that see the store only through its contract (store/ports.py), never its adapters.
THROUGH_PORTS = frozenset({"lifecycle", "service"})
STORE_PORTS = "jobstream.store.ports"


@cache
def below(unit: str) -> frozenset[str]:
    found: set[str] = set()
    for lower in DIRECTLY_BELOW[unit]:
        found |= {lower} | below(lower)
    return frozenset(found)


def unit_of(module: str) -> str | None:
    """`jobstream.store.jobs` -> `store`; None for a module outside the layer."""
    if module == ENVIRONMENT_READER or module.startswith(f"{ENVIRONMENT_READER}."):
        return "config.environment"
    parts = module.split(".")
    if parts[0] != "jobstream":
        return None
    return parts[1] if len(parts) > 1 else ""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every module an import statement of `path` names, relative imports resolved; `from a.b
    import x` names `a.b` and `a.b.x` (x may be a module)."""
    is_package = path.name == "__init__.py"
    module = module_name(path) if path.is_relative_to(PACKAGE) else ""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            yield node.lineno, origin
            # `from jobstream.jobtypes import candidate_search` names a module too.
            for alias in node.names:
                yield node.lineno, f"{origin}.{alias.name}"


def layer_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def upward_imports(path: Path) -> list[str]:
    unit = unit_of(module_name(path))
    assert unit is not None
    problems = []
    seen: set[tuple[int, str]] = set()  # `from a.b import x` names a.b and a.b.x: one problem
    for line, target in imported_modules(path):
        target_unit = unit_of(target)
        if target_unit in (None, "", unit) or (line, target_unit) in seen:
            continue
        seen.add((line, target_unit))
        if target_unit not in DIRECTLY_BELOW:
            problems.append(f"{path.name}:{line} imports {target}: {target_unit} has no layer")
        elif target_unit not in below(unit):
            problems.append(
                f"{path.name}:{line} imports {target}: {target_unit} is not below {unit}"
            )
    return problems


def test_every_unit_of_the_layer_has_its_place() -> None:
    units = {unit_of(module_name(path)) for path in layer_files()}
    assert sorted(units - set(DIRECTLY_BELOW)) == [], "give each new unit its place above"
    assert sorted(set(DIRECTLY_BELOW) - units) == [], "a unit that is gone"


def test_the_layering_has_no_cycle() -> None:
    assert [unit for unit in DIRECTLY_BELOW if unit in below(unit)] == []


def test_the_lifecycle_sits_between_the_services_and_the_store() -> None:
    """The composition root (runtime) is below the lifecycle, the lifecycle below the services:
    nothing the services build on points up at them."""
    assert {"store", "queue", "delivery", "config"} <= below("runtime")
    assert {"runtime", "store", "protocol"} <= below("lifecycle")
    assert {"lifecycle", "runtime", "store", "jobtypes"} <= below("service")
    assert "service" in below("http") & below("sqs_handler")
    assert not {"lifecycle", "service", "http", "sqs_handler"} & below("runtime")
    assert not {"service", "jobtypes"} & below("lifecycle")


@pytest.mark.parametrize("path", layer_files(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_imports_go_downward(path: Path) -> None:
    assert upward_imports(path) == []


def store_adapter_imports(path: Path) -> list[str]:
    """The modules of store/ other than its ports that `path` imports, when its unit may see
    the store only through them."""
    if unit_of(module_name(path)) not in THROUGH_PORTS:
        return []
    problems = []
    for line, target in imported_modules(path):
        # `from jobstream.store.ports import X` also names `jobstream.store.ports.X`.
        through_ports = target == STORE_PORTS or target.startswith(f"{STORE_PORTS}.")
        if unit_of(target) == "store" and not through_ports and target != "jobstream.store":
            problems.append(f"{path.name}:{line} imports {target}: only {STORE_PORTS} is seen")
    return problems


@pytest.mark.parametrize("path", layer_files(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_services_and_the_lifecycle_see_the_store_only_through_its_ports(path: Path) -> None:
    assert store_adapter_imports(path) == []


def job_type_of(module: str) -> str | None:
    """The job type whose package holds `module` (a package of jobtypes/ with a definition.py);
    None for the shared units of jobtypes/ (its top modules, `sources`) and everything else."""
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["jobstream", "jobtypes"]:
        return None
    return parts[2] if (PACKAGE / "jobtypes" / parts[2] / "definition.py").is_file() else None


def cross_job_type_imports(path: Path) -> list[str]:
    own = job_type_of(module_name(path))
    problems = []
    seen: set[tuple[int, str]] = set()
    for line, target in imported_modules(path):
        other = job_type_of(target)
        if other is not None and other != own and (line, other) not in seen:
            seen.add((line, other))
            problems.append(f"{path.name}:{line} imports {target}: the job type {other}'s own")
    return problems


@pytest.mark.parametrize("path", layer_files(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_a_job_type_imports_no_other_job_type(path: Path) -> None:
    """Job types share what is below them (jobtypes/base, sources, ...), never each other's
    packages: one can be removed or changed without touching another."""
    assert cross_job_type_imports(path) == []


def job_types() -> list[str]:
    return sorted(path.parent.name for path in (PACKAGE / "jobtypes").glob("*/definition.py"))


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "outbound").rglob("*.py")), ids=lambda path: path.name
)
def test_outbound_names_no_job_type(path: Path) -> None:
    """Callbacks and job types share the outbound unit: it serves URLs, whoever asks."""
    assert job_types(), "the job types are found"
    text = path.read_text(encoding="utf-8")
    assert [name for name in job_types() if name in text] == []


@pytest.mark.parametrize(
    "path", sorted(FUNCTIONS.glob("*/app.py")), ids=lambda path: path.parent.name
)
def test_functions_import_only_handler_shells_and_services(path: Path) -> None:
    units = {unit_of(target) for _, target in imported_modules(path)}
    # `from jobstream import runtime` names the package too: the unit is what it imports of it.
    assert units - {None, ""} <= FUNCTION_IMPORTS
    third_party = {
        target.split(".")[0]
        for _, target in imported_modules(path)
        if unit_of(target) is None and target.split(".")[0] not in {"__future__", "typing"}
    }
    assert third_party == set(), "functions reach AWS and libraries only through the layer"


# The shells a function's `handler` is made by: logging, metrics, deadline and error handling.
SHELLS = frozenset({"http_handler", "sqs_handler", "stream_handler", "schedule_handler"})


def handler_shell(path: Path) -> str | None:
    """The name of the call that makes `path`'s module-level `handler`, if a call makes it."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(target, "id", None) for target in node.targets] == ["handler"]
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            return node.value.func.id
    return None


@pytest.mark.parametrize(
    "path", sorted(FUNCTIONS.glob("*/app.py")), ids=lambda path: path.parent.name
)
def test_every_function_goes_through_a_handler_shell(path: Path) -> None:
    assert handler_shell(path) in SHELLS


# --- the check itself -------------------------------------------------------------------------


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("relative", "source", "found"),
    [
        (
            "queue.py",
            "from jobstream.store.callbacks import IntentRef\n",
            "store is not below queue",
        ),
        ("store/jobs.py", "from jobstream.protocol import events\n", "protocol is not below store"),
        ("protocol/task.py", "import jobstream.config.targets\n", "config is not below protocol"),
        ("config/settings.py", "from jobstream.delivery import http\n", "delivery is not below"),
        ("outbound/guard.py", "from jobstream.config import settings\n", "config is not below"),
        ("store/jobs.py", "from jobstream import queue\n", "queue is not below store"),
        ("store/jobs.py", "from ..service import jobs\n", "service is not below store"),
        ("store/jobs.py", "from jobstream import runtime\n", "runtime is not below store"),
        ("runtime.py", "from jobstream.lifecycle import log\n", "lifecycle is not below runtime"),
        ("lifecycle/log.py", "from jobstream.service import jobs\n", "service is not below"),
        ("lifecycle/log.py", "from jobstream.jobtypes import runner\n", "jobtypes is not below"),
        ("store/jobs.py", "def f():\n    from jobstream.http import api\n", "http is not below"),
        ("domain.py", "from jobstream.novelty import x\n", "novelty has no layer"),
    ],
)
def test_an_upward_import_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: str, source: str, found: str
) -> None:
    package = tmp_path / "jobstream"
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    path = write(package, relative, source)
    (problem,) = upward_imports(path)
    assert found in problem


@pytest.mark.parametrize(
    "source",
    [
        "from jobstream.store.jobs import StaleJobError\n",
        "from jobstream.store import keys\n",
        "import jobstream.store.listing\n",
        "def f():\n    from jobstream.store.budgets import clip\n",
    ],
)
def test_a_store_adapter_import_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    package = tmp_path / "jobstream"
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    for relative in ("service/jobs.py", "lifecycle/log.py"):
        assert store_adapter_imports(write(package, relative, source)) != []
    assert store_adapter_imports(write(package, "runtime.py", source)) == []
    ports = "from jobstream.store.ports import StaleJobError\nfrom jobstream.store import ports\n"
    assert store_adapter_imports(write(package, "service/jobs.py", ports)) == []


def test_a_downward_import_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "jobstream"
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    source = (
        "from jobstream.store.ports import JobQuery\nfrom jobstream import domain\nimport json\n"
    )
    assert upward_imports(write(package, "service/jobs.py", source)) == []


def test_an_import_of_another_job_type_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "jobstream"
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    for name in ("search", "fetch"):
        write(package, f"jobtypes/{name}/definition.py", "")
    write(package, "jobtypes/sources/base.py", "")
    path = write(
        package,
        "jobtypes/fetch/executor.py",
        "from jobstream.jobtypes.sources.base import SourceError\n"
        "from jobstream.jobtypes.fetch import definition\n"
        "def f():\n    from jobstream.jobtypes.search.params import parse\n",
    )
    (problem,) = cross_job_type_imports(path)
    assert "jobstream.jobtypes.search.params: the job type search's own" in problem
    named = write(package, "jobtypes/fetch/plan.py", "from jobstream.jobtypes import search\n")
    (problem,) = cross_job_type_imports(named)
    assert "imports jobstream.jobtypes.search: the job type search's own" in problem
    shared = write(package, "jobtypes/runner.py", "from jobstream.jobtypes.search import x\n")
    assert cross_job_type_imports(shared) != []
