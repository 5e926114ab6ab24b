"""clients/python is a package of its own: it builds with pip, ships its data, and the SDK runs
on the standard library alone, away from this repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.fake_producer import fake_producer

PACKAGE = Path(__file__).resolve().parents[2] / "clients" / "python"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A copy: building writes build/ and *.egg-info next to the sources.
    source = shutil.copytree(PACKAGE, out / "source", ignore=shutil.ignore_patterns("__pycache__"))
    # Offline: the build backend (setuptools, wheel) is the one already in this environment.
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run(  # noqa: S603 - pip on this repository's package
        [*pip, "--wheel-dir", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (built,) = out.glob("jobstream_client-*.whl")
    return built


def test_the_wheel_holds_both_packages_their_data_and_no_runtime_dependency(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith("METADATA"))
        entry_points = next(
            archive.read(n).decode() for n in names if n.endswith("entry_points.txt")
        )
    for name in (
        "jobstream_client/client.py",
        "jobstream_client/py.typed",
        "jobstream_conformance/py.typed",
        "jobstream_conformance/protocol/v1/protocol.schema.json",
        "jobstream_conformance/protocol/v1/error-mapping.json",
        "jobstream_conformance/protocol/v1/PROVENANCE.md",
    ):
        assert name in names
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires == ['Requires-Dist: jsonschema>=4.18; extra == "conformance"']
    assert "jobstream-conformance = jobstream_conformance.cli:main" in entry_points


def test_the_sdk_runs_on_the_standard_library_alone(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path)
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from jobstream_client import Client, new_task;"
        "c = Client(sys.argv[2], 'token-a');"
        "s = c.submit(new_task('candidate_search', {}));"
        "print(s.created, c.get(s.job.job_id).job_id == s.job.job_id, c.capabilities().supports())"
    )
    with fake_producer() as producer:
        # -S -I: no site-packages, no environment: only the standard library and the wheel.
        result = subprocess.run(  # noqa: S603 - this interpreter on the wheel just built
            [sys.executable, "-S", "-I", "-c", program, str(tmp_path), producer.url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]
