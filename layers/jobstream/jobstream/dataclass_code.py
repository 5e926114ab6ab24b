"""The code of the methods `dataclasses` generates, compiled when the layer is built.

For every dataclass, Python writes the source of its methods (`__init__`, `__repr__`, `__eq__`,
`__hash__`, `__setattr__`, ...) and compiles it while the module is imported: the layer's
dataclasses (ours and its dependencies') cost a cold start about 35 ms of compiling, the same
texts every time. So the layer's build (layers/jobstream/Makefile) runs this module: it imports
every module of the package, records each text `dataclasses` compiles, and writes the code
objects, marshalled, to `dataclass_code.bin` beside this file. Importing the package calls
`install()`, which reads that file and gives `dataclasses` an `exec` that runs the recorded code
for a text it recorded and compiles any other text as before.

The classes are the same as without it: a text's code is what `exec` would compile from it (no
compiler flags inherited, the same optimisation level, the same interpreter: the file starts
with the bytecode's magic number and the level, and on any other interpreter or level nothing is
installed). Like the layer's .pyc files, it only saves compiling. Without the file (the sources,
the local stack, the tests), nothing changes.
"""

from __future__ import annotations

import dataclasses
import marshal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType
from typing import Any, Final

FILE: Final = Path(__file__).with_name("dataclass_code.bin")
# What `dataclasses` calls by this name (a global of its module, else the builtin): both the
# 3.11 and the 3.13 implementations `exec` each generated text there.
_NAME: Final = "exec"


def _header() -> bytes:
    """Which interpreter and optimisation level the code was compiled for."""
    return MAGIC_NUMBER + bytes([sys.flags.optimize])


def compiled(text: str) -> CodeType:
    """What `exec(text, ...)` compiles when `dataclasses` calls it: no future flags (its module
    has none; `dont_inherit` keeps this module's from leaking in), this process's level."""
    return compile(text, "<string>", "exec", dont_inherit=True)


class RecordedExec:
    """`exec` for `dataclasses`: a recorded text runs its recorded code, any other is compiled
    (and, while the build records, recorded)."""

    def __init__(self, codes: dict[str, CodeType], *, recording: bool = False) -> None:
        self.codes = codes
        self.recording = recording
        self.hits = 0
        self.misses = 0

    def __call__(
        self, source: str | CodeType, globals_: dict[str, Any] | None = None, locals_: Any = None, /
    ) -> None:
        if not isinstance(source, str):
            exec(source, globals_, locals_)  # noqa: S102 - as dataclasses does
            return
        code = self.codes.get(source)
        if code is not None:
            self.hits += 1
        elif self.recording:
            code = self.codes[source] = compiled(source)
        else:
            self.misses += 1
            # Compiled as `dataclasses` compiles it: `exec` of a text here would inherit this
            # module's `from __future__ import annotations`.
            code = compiled(source)
        exec(code, globals_, locals_)  # noqa: S102 - as dataclasses does


def installed() -> RecordedExec | None:
    """The recorded code `dataclasses` runs now, if any."""
    current = dataclasses.__dict__.get(_NAME)
    return current if isinstance(current, RecordedExec) else None


def install(path: Path = FILE) -> RecordedExec | None:
    """Give `dataclasses` the code recorded in `path`, if it was recorded for this interpreter."""
    current = installed()
    if current is not None and current.recording:
        return None  # the build is recording: every text is compiled
    try:
        data = path.read_bytes()
    except OSError:
        return None  # not a built layer
    header = _header()
    if not data.startswith(header):
        return None  # another interpreter's bytecode, or another optimisation level
    codes = marshal.loads(data[len(header) :])  # noqa: S302 - our own build's file
    recorded = RecordedExec(codes)
    setattr(dataclasses, _NAME, recorded)
    return recorded


@contextmanager
def recording() -> Iterator[dict[str, CodeType]]:
    """Every text `dataclasses` compiles meanwhile, with its code."""
    recorder = RecordedExec({}, recording=True)
    previous = dataclasses.__dict__.get(_NAME)
    setattr(dataclasses, _NAME, recorder)
    try:
        yield recorder.codes
    finally:
        if previous is None:
            delattr(dataclasses, _NAME)
        else:
            setattr(dataclasses, _NAME, previous)


def record_package() -> dict[str, CodeType]:
    """The texts importing every module of the package compiles, with their code. For the
    build's own process only: the package's modules imported so far (by this module's import)
    are forgotten, so that each is imported, and its classes made, while recording."""
    import importlib  # noqa: PLC0415 - the build's, not a cold start's
    import pkgutil  # noqa: PLC0415

    package = __name__.rpartition(".")[0]
    with recording() as codes:
        for name in [name for name in sys.modules if name.partition(".")[0] == package]:
            if name != __name__:
                del sys.modules[name]
        # Each module's import imports the package first, again: its __init__ too is recorded.
        for module in pkgutil.walk_packages([str(FILE.parent)], f"{package}."):
            importlib.import_module(module.name)
    return codes


def write(codes: dict[str, CodeType], path: Path) -> None:
    path.write_bytes(_header() + marshal.dumps(codes))


def main(argv: list[str]) -> int:
    """Record the package's dataclasses into the file `argv` names (the layer's Makefile)."""
    if len(argv) != 1:
        sys.stderr.write("usage: main([FILE])\n")
        return 2
    codes = record_package()
    write(codes, Path(argv[0]))
    sys.stdout.write(f"dataclass_code: {len(codes)} texts recorded\n")
    return 0
