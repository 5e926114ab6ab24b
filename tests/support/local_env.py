"""A running stack's local-env file as a stack publishes it, for CLI tests that need no stack."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jobstream_local import local_env


@contextmanager
def published(folder: Path, url: str, **values: str) -> Iterator[Path]:
    """The file a stack at `url` holds while it runs (`jobstream_local.local_env.hold`)."""
    port = int(url.rsplit(":", 1)[1])
    held = local_env.hold(local_env.file_for(folder, port), {"JOBSTREAM_URL": url, **values})
    try:
        yield held.path
    finally:
        held.release()


@contextmanager
def local_env_dir(tmp_path: Path) -> Iterator[Path]:
    """A local-env directory of the test's own (JOBSTREAM_LOCAL_ENV_DIR, no JOBSTREAM_PORT), and
    this process's environment as it was afterwards: --local replaces its AWS and functions'
    settings with the stack's."""
    folder = tmp_path / "local-env"
    before = dict(os.environ)
    os.environ[local_env.DIRECTORY_VARIABLE] = str(folder)
    os.environ.pop("JOBSTREAM_PORT", None)
    try:
        yield folder
    finally:
        os.environ.clear()
        os.environ.update(before)
