"""What `jobstream --local` reads to reach a running local stack: one file per stack.

Each stack writes `local-env-<port>.json` into JOBSTREAM_LOCAL_ENV_DIR (`.jobstream/` in the
repository) once it listens: its URL, the token the CLI may use and the environment its functions
run with (never the developer's AWS credentials). The file is 0600 in a 0700 directory, written
whole before it appears under its name (a reader never sees half of it), and held under an
exclusive lock (flock) for as long as the stack runs. The lock is what says the stack is alive:
the kernel drops it when the process ends, however it ends, so a file a killed stack left is
known to be stale (readers skip it, the next stack on that port replaces it), a running stack's
file is never taken over, and a stopping stack removes only its own file.

Standard library only: the CLI imports it too.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DIRECTORY_VARIABLE: Final = "JOBSTREAM_LOCAL_ENV_DIR"
DEFAULT_DIRECTORY: Final = Path(__file__).resolve().parent.parent / ".jobstream"
_FILE_NAME: Final = re.compile(r"local-env-(\d{1,5})\.json", re.ASCII)


class LocalEnvInUseError(Exception):
    """The file of this port belongs to another stack that is running."""


def directory(environ: Mapping[str, str]) -> Path:
    """Where stacks leave their files: JOBSTREAM_LOCAL_ENV_DIR, else `.jobstream/`."""
    configured = (environ.get(DIRECTORY_VARIABLE) or "").strip()
    return Path(configured) if configured else DEFAULT_DIRECTORY


def file_for(folder: Path, port: int) -> Path:
    return folder / f"local-env-{port}.json"


@dataclass
class HeldFile:
    """A stack's own file, locked until `release`."""

    path: Path
    descriptor: int

    def release(self) -> None:
        """Remove the file if it is still this one (never another stack's), then unlock it."""
        try:
            here, mine = self.path.stat(), os.fstat(self.descriptor)
            if (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
                self.path.unlink()
        except FileNotFoundError:
            pass
        finally:
            os.close(self.descriptor)


def hold(path: Path, values: Mapping[str, str]) -> HeldFile:
    """Publish `values` at `path`, locked for as long as this process keeps the result.

    LocalEnvInUseError when a running stack holds `path`; a stale file is replaced."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp creates the file 0600: only its owner reads the token in it.
    descriptor, temporary = tempfile.mkstemp(prefix=".local-env-", dir=path.parent)
    try:
        with os.fdopen(os.dup(descriptor), "w", encoding="utf-8") as out:
            json.dump(dict(values), out)
        # A file no one else has opened yet: the lock is granted at once.
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _publish(Path(temporary), path)
    except BaseException:
        os.close(descriptor)
        Path(temporary).unlink(missing_ok=True)
        raise
    return HeldFile(path, descriptor)


def _publish(temporary: Path, path: Path) -> None:
    try:
        # Atomic, and only where no file is: a running stack's file is never overwritten.
        os.link(temporary, path)
    except FileExistsError:
        if is_held(path):
            raise LocalEnvInUseError(f"{path.name} belongs to a running stack") from None
        temporary.replace(path)  # left by a stack that is gone
        return
    temporary.unlink()


def is_held(path: Path) -> bool:
    """Whether a running stack holds `path` (its exclusive lock refuses a shared one)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # also lets go of the shared lock, if it was granted
    return False


def read(path: Path) -> dict[str, str] | None:
    """The values a running stack published at `path`; None if no running stack holds it.
    ValueError for a file that is not what a stack writes."""
    if not is_held(path):
        return None
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:  # the stack stopped in between
        return None
    if not isinstance(values, dict):
        raise ValueError(f"{path.name} is not a JSON object")  # noqa: TRY004 - bad content
    return {str(name): str(value) for name, value in values.items()}


def running(folder: Path) -> dict[int, Path]:
    """The files of the stacks running now, by port."""
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return {}
    found: dict[int, Path] = {}
    for entry in entries:
        match = _FILE_NAME.fullmatch(entry.name)
        if match is not None and is_held(entry):
            found[int(match[1])] = entry
    return dict(sorted(found.items()))
