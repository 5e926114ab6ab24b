"""The local-env file of a running stack: one per port, its owner's only, held while it runs."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from jobstream_local import local_env
from jobstream_local.local_env import LocalEnvInUseError, file_for, hold, is_held, read, running


def test_a_file_is_its_owners_only_and_whole(tmp_path: Path) -> None:
    folder = tmp_path / "new"
    held = hold(file_for(folder, 3000), {"JOBSTREAM_URL": "http://127.0.0.1:3000"})
    try:
        assert stat.S_IMODE(held.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert read(held.path) == {"JOBSTREAM_URL": "http://127.0.0.1:3000"}
        # Written under another name first: no half-written file is ever under its own.
        assert [entry.name for entry in folder.iterdir()] == ["local-env-3000.json"]
    finally:
        held.release()
    assert list(folder.iterdir()) == []


def test_a_running_stacks_file_is_never_taken_over(tmp_path: Path) -> None:
    first = hold(file_for(tmp_path, 3000), {"JOBSTREAM_URL": "first"})
    try:
        with pytest.raises(LocalEnvInUseError, match=r"local-env-3000\.json belongs to a running"):
            hold(file_for(tmp_path, 3000), {"JOBSTREAM_URL": "second"})
        assert read(first.path) == {"JOBSTREAM_URL": "first"}
        assert [entry.name for entry in tmp_path.iterdir()] == ["local-env-3000.json"]
    finally:
        first.release()


def test_each_port_has_its_own_file_and_a_stack_removes_only_its_own(tmp_path: Path) -> None:
    one = hold(file_for(tmp_path, 3000), {"JOBSTREAM_URL": "one"})
    two = hold(file_for(tmp_path, 3001), {"JOBSTREAM_URL": "two"})
    assert running(tmp_path) == {3000: one.path, 3001: two.path}
    two.release()
    assert running(tmp_path) == {3000: one.path}
    assert read(one.path) == {"JOBSTREAM_URL": "one"}
    one.release()
    assert running(tmp_path) == {}


def test_a_file_whose_stack_is_gone_is_stale_and_replaced(tmp_path: Path) -> None:
    path = file_for(tmp_path, 3000)
    # A stack killed without cleanup: the kernel dropped its lock with the process.
    script = (
        "import sys; from pathlib import Path; from jobstream_local.local_env import hold; "
        "hold(Path(sys.argv[1]), {'JOBSTREAM_URL': 'killed'})"
    )
    repository = Path(local_env.__file__).resolve().parent.parent  # where `-c` imports from
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, cwd=repository)  # noqa: S603
    assert json.loads(path.read_text(encoding="utf-8")) == {"JOBSTREAM_URL": "killed"}
    assert (is_held(path), read(path), running(tmp_path)) == (False, None, {})
    again = hold(path, {"JOBSTREAM_URL": "again"})
    try:
        assert read(path) == {"JOBSTREAM_URL": "again"}
    finally:
        again.release()


def test_a_replaced_file_is_not_removed_by_its_former_owner(tmp_path: Path) -> None:
    path = file_for(tmp_path, 3000)
    first = hold(path, {"JOBSTREAM_URL": "first"})
    path.unlink()  # someone cleaned up by hand, and another stack published since
    second = hold(path, {"JOBSTREAM_URL": "second"})
    first.release()
    assert read(path) == {"JOBSTREAM_URL": "second"}
    second.release()


def test_the_directory_is_the_variable_or_the_repositorys(tmp_path: Path) -> None:
    assert local_env.directory({}) == local_env.DEFAULT_DIRECTORY
    assert local_env.directory({"JOBSTREAM_LOCAL_ENV_DIR": f" {tmp_path} "}) == tmp_path
