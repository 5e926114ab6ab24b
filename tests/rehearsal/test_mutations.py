"""The rehearsal catches what `sam validate` cannot: each test breaks a copy of the SAM build in
one way cfn-lint accepts, deploys it to the emulator, and expects the rehearsal to fail with a
message that names the cause. Run by `make rehearse` (marker `rehearsal`); each takes ~20-90 s.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobstream_local.template import Template
from rehearsal import mutations
from rehearsal.run import Options, Report, _build, rehearse
from rehearsal.stack import Stack
from rehearsal.toolchain import REPOSITORY, RehearsalError

pytestmark = pytest.mark.rehearsal
CFN_LINT = REPOSITORY / ".venv" / "bin" / "cfn-lint"


@pytest.fixture(scope="session")
def host_build() -> Path:
    """The rehearsal's own build for this machine (sam's cache makes it quick after a run)."""
    document = Template.load(REPOSITORY / "template.yaml").document
    return _build(Options(parity=False, say=lambda _: None), document, Report())


def _lint_clean(template: Path) -> None:
    """What `sam validate --lint` runs accepts the mutant: only the rehearsal can catch it."""
    result = subprocess.run(  # noqa: S603
        [str(CFN_LINT), str(template)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout


def _rehearse_mutant(
    tmp_path: Path,
    build: Path,
    sweep_timeout_s: float = 30.0,
    after_deploy: Callable[[Stack], None] | None = None,
) -> RehearsalError:
    lines: list[str] = []
    options = Options(
        template=build / "template.yaml",
        built=build,
        suites=False,
        sweep_timeout_s=sweep_timeout_s,
        work_dir=tmp_path / "work",
        say=lines.append,
        after_deploy=after_deploy,
    )
    with pytest.raises(RehearsalError) as failure:
        rehearse(options)
    print("\n".join(lines), f"\nFAILED at {failure.value.step}: {failure.value.message}")
    return failure.value


def _template_mutant(
    tmp_path: Path, host_build: Path, mutate: Callable[[dict[str, Any]], str]
) -> RehearsalError:
    """Mutate the built template, show cfn-lint accepts it, and rehearse it."""
    build = mutations.copy_build(host_build, tmp_path / "build")
    document = mutations.load(build)
    print(mutate(document))
    _lint_clean(mutations.save(build, document))
    return _rehearse_mutant(tmp_path, build)


def test_a_missing_iam_permission_fails_the_rehearsal(tmp_path: Path, host_build: Path) -> None:
    error = _template_mutant(
        tmp_path,
        host_build,
        lambda document: mutations.drop_permission(document, "sqs:SendMessage"),
    )

    assert error.step == "submit, worker runs it"
    assert "is not authorized to perform: sqs:SendMessage" in error.message


def test_a_wrong_handler_path_fails_the_rehearsal(tmp_path: Path, host_build: Path) -> None:
    error = _template_mutant(
        tmp_path,
        host_build,
        lambda document: mutations.break_handler(document, "GET /capabilities"),
    )

    assert error.step == "GET /capabilities"
    assert "No module named 'app_renamed'" in error.message


def test_an_environment_variable_the_template_does_not_set_fails_the_rehearsal(
    tmp_path: Path, host_build: Path
) -> None:
    error = _template_mutant(
        tmp_path, host_build, lambda document: mutations.drop_variable(document, "JOBSTREAM_TABLE")
    )

    assert error.step == "GET /capabilities"
    assert "JOBSTREAM_TABLE is required" in error.message


def test_a_layer_missing_a_dependency_fails_the_rehearsal(tmp_path: Path, host_build: Path) -> None:
    build = mutations.copy_build(host_build, tmp_path / "build")
    mutations.drop_layer_package(build, "pydantic")

    error = _rehearse_mutant(tmp_path, build)

    assert error.step == "GET /capabilities"
    assert "No module named 'pydantic'" in error.message


def test_a_route_api_gateway_may_not_invoke_fails_the_rehearsal(
    tmp_path: Path, host_build: Path
) -> None:
    build = mutations.copy_build(host_build, tmp_path / "build")
    behind = mutations.function_behind(mutations.load(build), "POST /jobs")

    error = _rehearse_mutant(
        tmp_path,
        build,
        after_deploy=lambda stack: print(mutations.revoke_api_invoke(stack, behind)),
    )

    assert error.step == "submit, worker runs it"
    assert "API Gateway may not invoke" in error.message


def test_a_schedule_role_that_may_not_invoke_fails_the_rehearsal(
    tmp_path: Path, host_build: Path
) -> None:
    error = _template_mutant(tmp_path, host_build, mutations.schedule_role_without_invoke)

    # The refusal ends whichever step is waiting when the schedule first fires.
    assert "is not allowed lambda:InvokeFunction (No matching Allow statement)" in error.message
