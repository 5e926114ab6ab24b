"""The garbage collector during a cold start (jobstream/collector.py): paused by importing the
package in a Lambda environment, resumed by the first invocation of any function's handler with
what the import made frozen; untouched anywhere else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(path.parent.name for path in (REPOSITORY / "functions").glob("*/app.py"))

_PROBE = """
import gc, importlib.util, json, sys
seen = {"before": gc.isenabled()}
import jobstream
seen["imported"] = gc.isenabled()
from jobstream import observability
seen["invoked"] = observability.instrument(lambda event, context: gc.isenabled())({}, None)
seen["frozen"] = gc.get_freeze_count()
seen["again"] = observability.instrument(lambda event, context: gc.isenabled())({}, None)
print(json.dumps(seen))
"""


def _run(code: str, **environment: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBSTREAM_", "AWS_LAMBDA"))}
    env.update(PYTHONPATH=str(REPOSITORY / "layers" / "jobstream"), **environment)
    result = subprocess.run(  # noqa: S603 - our own interpreter and code
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    found: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return found


def test_in_lambda_the_import_pauses_it_and_the_first_invocation_resumes_it_frozen() -> None:
    seen = _run(_PROBE, AWS_LAMBDA_FUNCTION_NAME="jobstream-ApiFunction")
    assert seen["before"] is True
    assert seen["imported"] is False
    assert seen["invoked"] is True
    assert isinstance(seen["frozen"], int)
    assert seen["frozen"] > 10_000  # the import's objects, skipped by every later pass
    assert seen["again"] is True


@pytest.mark.parametrize("name", ["", "  "])
def test_outside_lambda_nothing_changes(name: str) -> None:
    seen = _run(_PROBE, AWS_LAMBDA_FUNCTION_NAME=name)
    assert seen == {"before": True, "imported": True, "invoked": True, "frozen": 0, "again": True}


def test_a_collector_paused_by_someone_else_stays_paused() -> None:
    code = "import gc; gc.disable()\n" + _PROBE
    seen = _run(code, AWS_LAMBDA_FUNCTION_NAME="jobstream-ApiFunction")
    assert (seen["imported"], seen["invoked"], seen["frozen"]) == (False, False, 0)


def test_every_functions_handler_resumes_it() -> None:
    """Each handler is instrumented, so its first invocation resumes the collector: a function
    whose handler were not would run with it paused for the life of its environment."""
    code = f"""
import importlib.util, json
from jobstream import observability
instrumented = observability.instrument(lambda event, context: None).__code__
found = {{}}
for function in {FUNCTIONS!r}:
    spec = importlib.util.spec_from_file_location(
        "app_" + function, {str(REPOSITORY / "functions")!r} + "/" + function + "/app.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found[function] = module.handler.__code__ is instrumented  # instrument's own wrapper
print(json.dumps(found))
"""
    found = _run(code, AWS_LAMBDA_FUNCTION_NAME="jobstream-ApiFunction", JOBSTREAM_TABLE="t")
    assert found == dict.fromkeys(FUNCTIONS, True)
