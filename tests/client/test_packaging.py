"""clients/python is a package of its own: it builds with pip, ships its data, and the SDK runs
on the standard library alone, away from this repository."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from mypy.config_parser import parse_config_file
from mypy.find_sources import create_source_list
from mypy.options import Options

from tests.support.fake_producer import fake_producer

REPOSITORY = Path(__file__).resolve().parents[2]
PACKAGE = REPOSITORY / "clients" / "python"


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


def test_the_readmes_sdk_install_leaves_the_checkout_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pip install ./clients/python`, as the README says, builds in the source tree (build/,
    *.egg-info): a checkout must stay clean for git, and ruff and mypy must not read the copies
    (they used to: `make test` then failed in `ruff check`)."""
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    (install,) = set(re.findall(r"`(pip install \./clients/python)`", readme))
    checkout = tmp_path / "checkout"
    for name in (".gitignore", "pyproject.toml"):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPOSITORY / name, checkout / name)
    shutil.copytree(PACKAGE, checkout / "clients" / "python", ignore=_not_tracked)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.test"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        _run([*git, *command], checkout)
    # Offline: the build backend is this environment's, and the install goes to a folder.
    _run(
        [sys.executable, "-m", *install.split(), "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(tmp_path / "site")],
        checkout,
    )  # fmt: skip
    written = [*checkout.glob("clients/python/build"), *checkout.glob("clients/python/*.egg-info")]
    assert len(written) == 2  # what the install leaves behind, or this test proves nothing
    assert _run([*git, "status", "--porcelain", "--untracked-files=all"], checkout) == ""
    # Ruff as `make lint` runs it, and as it runs where no .gitignore is read (an archive).
    ruff = [str(Path(sys.executable).parent / "ruff"), "check", "--show-files"]
    for options in ([], ["--no-respect-gitignore"]):
        listed = _run([*ruff, *options, "."], checkout).splitlines()
        assert any("jobstream_client" in line for line in listed)  # the sources are linted
        assert [line for line in listed if "/build/" in line or ".egg-info" in line] == []
    monkeypatch.chdir(checkout)
    options = Options()
    parse_config_file(options, lambda: None, "pyproject.toml", io.StringIO(), io.StringIO())
    checked = [source.path for source in create_source_list(["clients/python"], options)]
    assert any(path and "jobstream_client" in path for path in checked)
    assert [path for path in checked if path and ("build" in path or "egg-info" in path)] == []


def _not_tracked(directory: str, names: list[str]) -> set[str]:
    # What a clean checkout holds: no caches, no earlier build.
    return {n for n in names if n in {"__pycache__", "build"} or n.endswith(".egg-info")}


def _run(command: list[str], cwd: Path) -> str:
    result = subprocess.run(  # noqa: S603 - git, pip and ruff on a scratch copy
        command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, (command, result.stdout, result.stderr)
    return result.stdout
