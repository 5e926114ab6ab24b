"""Cold imports of every function, as Lambda imports them from the layer `sam build` ships.

The layer is built by its own Makefile (layers/jobstream/Makefile, the recipe `sam build` runs),
here for this machine's architecture, into a temporary directory. Each function is imported in a
fresh interpreter with that layer and its code folder on the path and bytecode writing off (Lambda's
/opt is read-only), and compared with `import boto3` in a fresh interpreter of its own: the two run
one after the other, in alternating order, and the ratio of each pair is taken, so that whatever
else loads the machine meanwhile weighs on both sides of each ratio. The median of the ratios is
reported. The same layer without its bytecode (what a `python3.11` build method ships) shows what
the bytecode saves. "Set-up" adds what every first invocation on AWS does before its first call:
resuming the garbage collector the import paused (jobstream/collector.py), the settings, the
targets file, the logger, the DynamoDB client and, in the functions that read the consumer
registry, the Secrets Manager client (the read itself is a call, not measured here). Both run in
a Lambda environment as far as the package can tell (AWS_LAMBDA_FUNCTION_NAME set).
The floor is what the house rules cost before any code of ours: botocore, pydantic's import and
one client from a plain botocore session, paired with `import boto3` and one client the same way.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache, partial
from pathlib import Path
from typing import TypeVar

from jobstream_local.template import Template
from rehearsal import toolchain

REPOSITORY = Path(__file__).resolve().parent.parent
LAYER_SOURCE = REPOSITORY / "layers" / "jobstream"
FUNCTIONS = ("admission", "jobs", "events", "ack", "callbacks", "dispatcher", "reconcile", "worker")
Ours = TypeVar("Ours")
Baseline = TypeVar("Baseline")
PAIRS = 15
PAIRS_WITHOUT_BYTECODE = 5
MACHINE_ARCHITECTURES = {
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "aarch64": "arm64",
    "arm64": "arm64",
}

_IMPORT = """
import time
started, started_cpu = time.perf_counter(), time.process_time()
{statement}
imported, imported_cpu = time.perf_counter(), time.process_time()
{setup}
print(imported - started, time.perf_counter() - imported, time.process_time() - started_cpu)
"""
_SETUP = """
from jobstream import observability
observability.end_import()
from jobstream import runtime
rt = runtime.runtime()
rt.targets()
observability.logger()
rt.store.connect()
"""
# The registry's client, in the functions that read the registry (template.yaml: every HTTP
# function and the callbacks function); its first read is a call, which no pair here makes.
_REGISTRY_CLIENT = """
from jobstream.config import stored
stored.client("secretsmanager")
"""
REGISTRY_READERS = frozenset({"admission", "jobs", "events", "ack", "callbacks"})
# The baseline of the set-up: boto3 imported and one client made, as the set-up makes its own.
_ONE_CLIENT = 'boto3.client("dynamodb")'
# What the house rules cost before any code of ours: clients from botocore (as jobstream/aws.py
# makes them), settings and protocol objects as pydantic models.
_FLOOR = "import botocore.session\nfrom pydantic import BaseModel"
_FLOOR_CLIENT = 'botocore.session.get_session().create_client("dynamodb")'
FLOOR_PAIRS = 15

# What the import and the set-up read, as on AWS: the function's name (set by Lambda), a table
# name and the registry's secret (no call is made); the template's variables for its dependencies
# are added (_dependency_environment).
_SETUP_ENVIRONMENT = {
    "AWS_LAMBDA_FUNCTION_NAME": "bench",
    "JOBSTREAM_TABLE": "bench",
    "JOBSTREAM_TENANTS_SECRET": "bench-tenants",
}


@dataclass(frozen=True)
class ColdImport:
    function: str
    seconds: float  # the import, median
    ratio: float  # median of per-pair ratios to `import boto3`
    setup_ratio: float  # import + set-up, median of per-pair ratios
    setup_seconds: float  # import + set-up, median
    setup_cpu_seconds: float  # import + set-up, CPU seconds, median (what a cold start bills)
    ratio_without_bytecode: float
    boto3_seconds: float  # `import boto3`, median over this function's pairs
    boto3_client_seconds: float  # `import boto3` and one client, median
    load: float  # the machine's 1-minute load average when its pairs ended


@dataclass(frozen=True)
class Interpreter:
    python: Path
    version: str  # major.minor


THIS_PYTHON = Interpreter(
    Path(sys.executable), f"{sys.version_info.major}.{sys.version_info.minor}"
)


def _output(code: str, path: list[Path], extra: dict[str, str], python: Path) -> str:
    """What `code` prints, run in a fresh interpreter with `path` and nothing else of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JOBSTREAM_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # Lambda cannot write next to the layer either
    if path:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    env.update(extra)
    output = subprocess.run(
        [str(python), "-X", "frozen_modules=on", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tempfile.gettempdir(),  # nothing of the repository on the path but what is named
    )
    return output.stdout


def _run(
    code: str, path: list[Path], extra: dict[str, str], python: Path
) -> tuple[float, float, float]:
    """The import's and the set-up's wall seconds, and the CPU seconds of both."""
    first, second, cpu = _output(code, path, extra, python).split()
    return float(first), float(second), float(cpu)


def _boto3(python: Path) -> tuple[float, float]:
    """`import boto3`, and that plus one client."""
    code = _IMPORT.format(statement="import boto3", setup=_ONE_CLIENT)
    imported, client, _ = _run(code, [], {}, python)
    return imported, imported + client


@cache
def _dependency_environment() -> dict[str, str]:
    """What the template sets for a dependency (Globals), as the functions run with it on AWS."""
    variables = Template.load().document["Globals"]["Function"]["Environment"]["Variables"]
    return {name: str(variables[name]) for name in ("PYDANTIC_DISABLE_PLUGINS",)}


def _function(name: str, layer: Path, *, setup: bool, python: Path) -> tuple[float, float, float]:
    steps = _SETUP + (_REGISTRY_CLIENT if name in REGISTRY_READERS else "")
    code = _IMPORT.format(statement="import app", setup=steps if setup else "")
    environment = {**_SETUP_ENVIRONMENT, **_dependency_environment()}
    return _run(code, [REPOSITORY / "functions" / name, layer], environment, python)


_RECORDED_CODE = """
import app
from jobstream import recorded_code
found = recorded_code.installation()
print(-1 if found is None or found.skipped else found.compiled)
"""


def check_recorded_code(layer: Path, python: Path) -> None:
    """Every function imports on the code the layer's build recorded (jobstream/recorded_code.py):
    none compiles a text of its own."""
    environment = {**_SETUP_ENVIRONMENT, **_dependency_environment()}
    for name in FUNCTIONS:
        path = [REPOSITORY / "functions" / name, layer]
        misses = int(_output(_RECORDED_CODE, path, environment, python))
        if misses:
            problem = "no recorded code" if misses < 0 else f"{misses} texts compiled"
            raise RuntimeError(f"bench: functions/{name} imported with {problem}")


@dataclass(frozen=True)
class Floor:
    ratio: float  # median of per-pair ratios to `import boto3` and one client
    seconds: float  # the floor's import and client, median
    load: float


def floor(layer: Path, python: Path) -> Floor:
    """botocore, pydantic and one client, paired with `import boto3` and one client."""
    code = _IMPORT.format(statement=_FLOOR, setup=_FLOOR_CLIENT)
    ours = partial(_run, code, [layer], {}, python)
    runs = _alternating(ours, partial(_boto3, python), FLOOR_PAIRS)
    samples = [(imported + client, baseline) for (imported, client, _), (_, baseline) in runs]
    return Floor(
        ratio=statistics.median(ours / base for ours, base in samples),
        seconds=statistics.median(ours for ours, _ in samples),
        load=os.getloadavg()[0],
    )


def _alternating(
    ours: Callable[[], Ours], baseline: Callable[[], Baseline], count: int
) -> list[tuple[Ours, Baseline]]:
    """`count` pairs of runs, which of the two goes first alternating: whatever else loads the
    machine meanwhile weighs on both sides of each pair."""
    pairs = []
    for index in range(count):
        if index % 2:
            mine = ours()
            theirs = baseline()
        else:
            theirs = baseline()
            mine = ours()
        pairs.append((mine, theirs))
    return pairs


def _pairs(
    name: str, layer: Path, count: int, *, setup: bool, python: Path
) -> list[tuple[float, float, float, float, float]]:
    """(function import, function import + set-up, boto3 import, boto3 import + one client,
    function import + set-up in CPU seconds) per pair, order alternating."""
    ours = partial(_function, name, layer, setup=setup, python=python)
    runs = _alternating(ours, partial(_boto3, python), count)
    return [
        (imported, imported + set_up, boto3, client, cpu)
        for (imported, set_up, cpu), (boto3, client) in runs
    ]


@contextmanager
def built_layers(interpreter: Interpreter) -> Iterator[tuple[Path, Path]]:
    """The layer as the Makefile builds it for this machine and `interpreter`, and the same
    without bytecode."""
    architecture = MACHINE_ARCHITECTURES.get(platform.machine().lower())
    if architecture is None:
        raise RuntimeError(f"bench: no Lambda architecture runs on {platform.machine()}")
    with tempfile.TemporaryDirectory(prefix="jobstream-layer-") as work:
        built = Path(work) / "built"
        subprocess.run(
            [  # noqa: S607 - make from PATH, as sam runs it
                "make",
                "--no-print-directory",
                "-C",
                str(LAYER_SOURCE),
                "build-JobstreamLayer",
                f"ARTIFACTS_DIR={built}",
                f"LAYER_ARCHITECTURE={architecture}",
                f"PYTHON={interpreter.python}",
                # Bytecode for the interpreter that imports it here.
                f"LAYER_PYTHON_VERSION={interpreter.version}",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        plain = Path(work) / "plain"
        shutil.copytree(built, plain, ignore=shutil.ignore_patterns("__pycache__"))
        yield built / "python", plain / "python"


@dataclass(frozen=True)
class ColdStarts:
    rows: list[ColdImport]
    floor: Floor
    version: str  # the Python that measured them (major.minor)
    # The same on the functions' runtime (its Python and botocore), where this machine has it.
    runtime: ColdStarts | None = None
    runtime_note: str = ""  # why the runtime was not measured


def _measured(name: str, layer: Path, without_bytecode: Path | None, python: Path) -> ColdImport:
    samples = _pairs(name, layer, PAIRS, setup=True, python=python)
    plain = (
        _pairs(name, without_bytecode, PAIRS_WITHOUT_BYTECODE, setup=False, python=python)
        if without_bytecode
        else []
    )
    return ColdImport(
        function=name,
        seconds=statistics.median(sample[0] for sample in samples),
        ratio=statistics.median(sample[0] / sample[2] for sample in samples),
        setup_ratio=statistics.median(sample[1] / sample[3] for sample in samples),
        setup_seconds=statistics.median(sample[1] for sample in samples),
        setup_cpu_seconds=statistics.median(sample[4] for sample in samples),
        ratio_without_bytecode=(
            statistics.median(sample[0] / sample[2] for sample in plain) if plain else math.nan
        ),
        boto3_seconds=statistics.median(sample[2] for sample in samples),
        boto3_client_seconds=statistics.median(sample[3] for sample in samples),
        load=os.getloadavg()[0],
    )


def _measured_on(
    interpreter: Interpreter, functions: tuple[str, ...], *, without_bytecode: bool
) -> ColdStarts:
    python = interpreter.python
    rows = []
    with built_layers(interpreter) as (layer, plain):
        check_recorded_code(layer, python)
        lowest = floor(layer, python)
        print(f"  the floor: {lowest.ratio:.2f}x import boto3 + one client", flush=True)
        for name in functions:
            rows.append(_measured(name, layer, plain if without_bytecode else None, python))
            print(
                f"  functions/{name}: {rows[-1].ratio:.2f}x import boto3, "
                f"{rows[-1].setup_ratio:.2f}x with set-up",
                flush=True,
            )
    return ColdStarts(rows, lowest, interpreter.version)


def runtime_interpreter() -> Interpreter | str:
    """The Lambda runtime's Python with its botocore, as the rehearsal sets it up; or why it
    is not measured."""
    if not toolchain.LAMBDA_PYTHON.exists():
        return (
            "this machine has no Lambda runtime as the rehearsal sets it up (`make "
            "rehearse-setup`: the template's Python with the runtime's botocore)"
        )
    try:
        version = toolchain.lambda_runtime_version()
    except toolchain.RehearsalError as error:
        return f"the rehearsal's Lambda runtime is incomplete ({error})"
    if version == THIS_PYTHON.version:
        return f"the rehearsal's Lambda runtime is this Python, {version}: the table above"
    return Interpreter(toolchain.LAMBDA_PYTHON, version)


def cold_imports(functions: tuple[str, ...] = FUNCTIONS) -> ColdStarts:
    runtime = runtime_interpreter()  # before the long part: a broken runtime says so at once
    measured = _measured_on(THIS_PYTHON, functions, without_bytecode=True)
    if isinstance(runtime, str):
        return replace(measured, runtime_note=runtime)
    print(f"  on the functions' runtime, Python {runtime.version}:", flush=True)
    on_runtime = _measured_on(runtime, functions, without_bytecode=False)
    return replace(measured, runtime=on_runtime)


def report_lines(cold: ColdStarts) -> list[str]:
    rows, lowest = cold.rows, cold.floor
    lines = [
        "## Cold start of each function",
        "",
        "Each function imported from the layer as `sam build` ships it (layers/jobstream/Makefile,",
        "built here for this machine: dependencies, our package, bytecode compiled at level 0 with",
        "`--invalidation-mode unchecked-hash`, the code the standard library compiles at import),",
        f"in a fresh Python {cold.version} interpreter that may not write bytecode",
        "(Lambda's /opt is read-only), paired with `import boto3` in a fresh interpreter run just",
        f"before or after it: the median of {PAIRS} per-pair ratios, so that the machine's load",
        "weighs on both sides of each ratio (bench/cold_start.py). Set-up is what every first",
        "invocation on AWS adds before its first call, lazily: resuming the garbage collector,",
        "the settings, the targets file, the logger, the DynamoDB client and, in the five",
        "functions that read the consumer registry, the Secrets Manager client (reading the",
        'secret is a call: one more on the first request, "admission (new, cold registry)" above).',
        'Its ratio is to `import boto3` plus `boto3.client("dynamodb")`, in the same pairs. The',
        "clients come from botocore's own session (jobstream/aws.py): boto3 is never imported.",
        "Without bytecode: the same layer without its .pyc files, as the `python3.11` build",
        f"method ships it (median of {PAIRS_WITHOUT_BYTECODE} pairs).",
        "",
        "Three things make the first invocation cheaper than the same code on plain Python and",
        "botocore, all on AWS as here:",
        "- **The code the standard library compiles at import is compiled by the layer's",
        "  build** (jobstream/recorded_code.py): `dataclasses` writes and compiles the methods",
        "  of every dataclass (ours, about 75, and our dependencies'), about 35 ms, and `typing`",
        "  compiles every string annotation it wraps in a forward reference (pydantic-core's",
        "  TypedDicts alone make about 800), about 10 ms: the same texts on every cold start.",
        "  The build records each text's code by importing every module; the import takes that",
        "  code (a copy for each use) instead of compiling the same text again (an exact text",
        "  match, on the interpreter and optimisation level it was compiled for; any other text",
        "  is compiled as before). The bench checks that every function imports without",
        "  compiling one.",
        "- **The garbage collector is paused while a function is imported**",
        "  (jobstream/collector.py): what the import allocates lives as long as the process, yet",
        "  the collector's passes over it cost about 40 ms. The first invocation freezes those",
        "  objects (later passes skip them) and resumes it.",
        "- **botocore's data is read for our clients' services** (jobstream/botocore_data.py):",
        "  a plain session scans every service's folder twice (about 25 ms) and parses 1.2 MB of",
        "  every service's endpoint data (about 20 ms) before its first client; ours looks up the",
        "  service it loads and reads our services' endpoint data (36 KB, from the pinned",
        "  botocore; a test keeps it equal and checks each request goes where botocore's own",
        "  client sends it).",
        "",
        (
            "| function | import (s) | ratio to `import boto3` | import + set-up (s) | "
            "ratio to `import boto3` + one client | import + set-up, CPU (s) | "
            "without bytecode | load |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| functions/{row.function} | {row.seconds:.3f} | {row.ratio:.2f} | "
        f"{row.setup_seconds:.3f} | {row.setup_ratio:.2f} | {row.setup_cpu_seconds:.3f} | "
        f"{row.ratio_without_bytecode:.2f} | {row.load:.1f} |"
        for row in rows
    ]
    boto3 = statistics.median(row.boto3_seconds for row in rows)
    client = statistics.median(row.boto3_client_seconds for row in rows)
    lines += [
        "",
        f"`import boto3` took {boto3:.3f} s, and with one client {client:.3f} s (medians; load:",
        "the 1-minute load average of this 2-core machine when each function's pairs ended).",
        "",
        "Target: import + set-up <= 1.2x `import boto3` plus one client. **The floor** under",
        "the house rules, before any code of ours and without the savings above, is botocore's",
        "import, pydantic's import (settings and protocol objects are pydantic models) and one",
        f"client from botocore's session: {lowest.seconds:.3f} s, **{lowest.ratio:.2f}x** `import",
        f"boto3` plus one client (median of {FLOOR_PAIRS} pairs; load {lowest.load:.1f}). The",
        "savings (which apply to botocore's and pydantic's share too) take back what our",
        "modules, the settings' validation and the logger (Powertools' import, about 12 ms) add",
        "to it. SnapStart for Python (python3.12 and later; the template's",
        "runtime is python3.13) would restore a snapshot taken after the import instead of",
        "running it: it is a property of a published version on AWS, so neither its restore",
        "time nor its charges (cache and restore, per GB) can be measured here.",
        "",
    ]
    return lines + runtime_lines(cold)


def runtime_lines(cold: ColdStarts) -> list[str]:
    """The same pairs on the functions' runtime, or why they were not measured."""
    lines = [f"### On the functions' runtime (Python {_template_python()})", ""]
    if cold.runtime is None:
        return [*lines, f"Not measured: {cold.runtime_note}.", ""]
    rows, lowest = cold.runtime.rows, cold.runtime.floor
    lines += [
        f"The same pairs on Python {cold.runtime.version} with the Lambda runtime's botocore",
        "and boto3 (the rehearsal's .venv-rehearsal/lambda-runtime), the layer built for it",
        f"by its Makefile. The floor there: **{lowest.ratio:.2f}x** `import boto3` plus one",
        f"client (load {lowest.load:.1f}).",
        "",
        (
            "| function | ratio to `import boto3` | import + set-up (s) | "
            "ratio to `import boto3` + one client | load |"
        ),
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| functions/{row.function} | {row.ratio:.2f} | {row.setup_seconds:.3f} | "
        f"{row.setup_ratio:.2f} | {row.load:.1f} |"
        for row in rows
    ]
    client = statistics.median(row.boto3_client_seconds for row in rows)
    return [*lines, "", f"`import boto3` with one client took {client:.3f} s (median).", ""]


def _template_python() -> str:
    """The functions' Python version, as template.yaml names their runtime."""
    runtime = str(Template.load().document["Globals"]["Function"]["Runtime"])
    return runtime.removeprefix("python")
