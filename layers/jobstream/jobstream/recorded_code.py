"""Code the standard library compiles from texts at import, compiled when the layer is built.

Two modules of the standard library write Python source while a function is imported and compile
it, the same texts on every cold start:
- `dataclasses` writes the methods of every dataclass (`__init__`, `__repr__`, `__eq__`,
  `__hash__`, `__setattr__`, ...) and `exec`s them: the layer's dataclasses, ours and its
  dependencies', cost about 35 ms of compiling;
- `typing` compiles every string annotation it wraps in a `ForwardRef` (pydantic-core's 80
  TypedDicts alone make about 800): about 10 ms.
So the layer's build (layers/jobstream/Makefile) runs this module: it imports every module of the
package, records each text the two compile, and writes the code, marshalled, to
`recorded_code.bin` beside this file. Importing the package calls `install()`, which reads that
file and gives each of the two a stand-in for the builtin it calls (`dataclasses.exec`,
`typing.compile`: names of their modules, which the builtins' are looked up after) that takes a
recorded text's code from the file and compiles any other text as before. The first invocation
(`observability.instrument`) gives them their builtins back (`uninstall()`), freeing the
recorded code, and logs a warning if the import compiled texts the build did not record (a
runtime's Python or botocore other than the build's) or the file could not be used: the cold
starts are slower, not wrong. A text that warns when compiled is not recorded (it warns each
time, as before).

The code is what the module would have compiled: the same text, no compiler flags (neither
module has a future import; `dont_inherit` keeps ours out), the same optimisation level and
interpreter (the file starts with the bytecode's magic number and the level; on any other,
nothing is installed), and each use gets its own copy, as it would from compiling (a code object
holds the interpreter's specialisations of its bytecode: classes sharing one would evict each
other's). Like the layer's .pyc files, it only saves compiling. Without the file (the sources,
the local stack, the tests), nothing changes.
"""

from __future__ import annotations

import dataclasses
import marshal
import sys
import threading
import typing
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, Final, Literal

FILE: Final = Path(__file__).with_name("recorded_code.bin")
Mode = Literal["exec", "eval"]


def _header() -> bytes:
    """Which interpreter and optimisation level the code was compiled for."""
    return MAGIC_NUMBER + bytes([sys.flags.optimize])


def compiled(text: str, mode: Mode) -> CodeType:
    """What `dataclasses`' `exec(text, ...)` or `typing`'s `compile(text, "<string>", "eval")`
    compiles: no future flags (neither module has one; `dont_inherit` keeps this module's out),
    this process's level."""
    return compile(text, "<string>", mode, dont_inherit=True)


class RecordedCode:
    """The texts one module compiles and their code: a recorded text's code is a copy of its
    own, unmarshalled; any other is compiled (and, while the build records, recorded)."""

    mode: Mode

    def __init__(self, codes: dict[str, bytes], *, recording: bool = False) -> None:
        self.codes = codes  # text -> its marshalled code
        self.recording = recording
        self.hits = 0
        self.misses = 0

    def code(self, text: str) -> CodeType:
        recorded = self.codes.get(text)
        if recorded is not None:
            self.hits += 1
            return marshal.loads(recorded)  # type: ignore[no-any-return]  # noqa: S302 - our build's
        if not self.recording:
            self.misses += 1
            return compiled(text, self.mode)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = compiled(text, self.mode)
        if not caught:  # a text that warns is compiled each time, so that it warns each time
            self.codes[text] = marshal.dumps(code)
        return code


class RecordedExec(RecordedCode):
    """`exec` for `dataclasses`, which runs each text of generated methods with it."""

    mode = "exec"

    def __call__(
        self, source: str | CodeType, globals_: dict[str, Any] | None = None, locals_: Any = None, /
    ) -> None:
        code = self.code(source) if isinstance(source, str) else source
        exec(code, globals_, locals_)  # noqa: S102 - as dataclasses does


class RecordedCompile(RecordedCode):
    """`compile` for `typing`, which compiles each forward reference's text with it."""

    mode = "eval"

    def __call__(  # noqa: PLR0917 - the builtin's signature
        self,
        source: Any,
        filename: Any,
        mode: str,
        flags: int = 0,
        dont_inherit: bool = False,  # noqa: ARG002 - the builtin's signature
        optimize: int = -1,
        **options: Any,
    ) -> Any:
        forward_reference = (
            isinstance(source, str)
            and (filename, mode, flags, optimize) == ("<string>", "eval", 0, -1)
            and not options
        )
        if forward_reference:
            return self.code(source)
        # `typing` has no future import to pass on (`dont_inherit` or not): nor does this call.
        return compile(source, filename, mode, flags, True, optimize, **options)


# Where each stand-in goes: the module, the name of the builtin it calls, the stand-in's type.
_SITES: Final[Mapping[str, tuple[ModuleType, str, type[RecordedCode]]]] = {
    "dataclasses": (dataclasses, "exec", RecordedExec),
    "typing": (typing, "compile", RecordedCompile),
}


def installed() -> dict[str, RecordedCode]:
    """The stand-ins in place now, by module."""
    return {site: held for site, held in _current().items() if isinstance(held, RecordedCode)}


class Installation:
    """What `install` put in place and what it replaced, or why it used no recorded code."""

    def __init__(
        self,
        stand_ins: dict[str, RecordedCode],
        previous: dict[str, object],
        skipped: str = "",
    ) -> None:
        self.stand_ins = stand_ins
        self.previous = previous  # by module: what the stand-in replaced (_ABSENT: nothing)
        self.skipped = skipped

    @property
    def compiled(self) -> int:
        """Texts compiled because the build had not recorded them."""
        return sum(stand_in.misses for stand_in in self.stand_ins.values())

    @property
    def recorded(self) -> int:
        """Texts whose recorded code was used."""
        return sum(stand_in.hits for stand_in in self.stand_ins.values())

    def problem(self) -> str | None:
        """What an operator should hear of: the cold starts are slower than they could be."""
        if self.skipped:
            return f"the layer's recorded code was not used: {self.skipped}"
        if self.compiled:
            return (
                "the import compiled code the layer's build did not record: "
                "build the layer with the runtime's Python and botocore"
            )
        return None


_ABSENT: Final = object()
_lock = threading.Lock()  # one installation per process
_installation: Installation | None = None


def installation() -> Installation | None:
    """The installation in place, if any."""
    return _installation


def install(path: Path = FILE) -> Installation | None:
    """Give `dataclasses` and `typing` the code recorded in `path` (once per process), if it was
    recorded for this interpreter; None without a file (the sources) or while recording."""
    global _installation  # noqa: PLW0603 - one installation per process
    with _lock:
        if _installation is not None:
            return _installation
        if any(current.recording for current in installed().values()):
            return None  # the build is recording: every text is compiled
        try:
            data = path.read_bytes()
        except OSError:
            return None  # not a built layer
        recorded, skipped = _read(data)
        previous = _current()
        stand_ins: dict[str, RecordedCode] = {}
        if recorded is not None:
            for site, (module, name, kind) in _SITES.items():
                stand_ins[site] = kind(recorded.get(site, {}))
                setattr(module, name, stand_ins[site])
        _installation = Installation(stand_ins, previous, skipped)
        return _installation


def _current() -> dict[str, object]:
    """What each module's name holds now, by module (_ABSENT: nothing)."""
    return {site: module.__dict__.get(name, _ABSENT) for site, (module, name, _) in _SITES.items()}


def _read(data: bytes) -> tuple[dict[str, dict[str, bytes]] | None, str]:
    """The recorded code by module, or why there is none to use."""
    header = _header()
    if not data.startswith(header):
        return None, "it was recorded for another Python or optimisation level"
    try:
        recorded = marshal.loads(data[len(header) :])  # noqa: S302 - our own build's file
    except (EOFError, ValueError, TypeError):
        return None, "its file is damaged"
    well_formed = isinstance(recorded, dict) and all(
        isinstance(texts, dict)
        and all(isinstance(text, str) and isinstance(code, bytes) for text, code in texts.items())
        for texts in recorded.values()
    )
    return (recorded, "") if well_formed else (None, "its file is damaged")


def uninstall() -> Installation | None:
    """Give `dataclasses` and `typing` back what they had (the import is over) and say what the
    installation did; once. A stand-in someone else replaced meanwhile is left to them."""
    global _installation
    with _lock:
        done, _installation = _installation, None
        if done is None:
            return None
        for site, stand_in in done.stand_ins.items():
            module, name, _ = _SITES[site]
            if module.__dict__.get(name) is stand_in:
                _put_back(site, done.previous[site])
    return done


def _put_back(site: str, previous: object) -> None:
    """Give the module's name back what it held before a stand-in (_ABSENT: nothing)."""
    module, name, _ = _SITES[site]
    if previous is _ABSENT:
        delattr(module, name)
    else:
        setattr(module, name, previous)


@contextmanager
def recording() -> Iterator[dict[str, dict[str, bytes]]]:
    """Every text `dataclasses` and `typing` compile meanwhile, with its code, by module."""
    previous = _current()
    recorders = {site: kind({}, recording=True) for site, (_, _, kind) in _SITES.items()}
    for site, (module, name, _) in _SITES.items():
        setattr(module, name, recorders[site])
    try:
        yield {site: recorder.codes for site, recorder in recorders.items()}
    finally:
        for site, held in previous.items():
            _put_back(site, held)


def record_package() -> dict[str, dict[str, bytes]]:
    """The texts importing every module of the package compiles, with their code. For the
    build's own process only: the package's modules imported so far (by this module's import)
    are forgotten, so that each is imported, and its code compiled, while recording."""
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


def write(codes: Mapping[str, dict[str, bytes]], path: Path) -> None:
    path.write_bytes(_header() + marshal.dumps(dict(codes)))


def main(argv: list[str]) -> int:
    """Record the package's compiled texts into the file `argv` names (the layer's Makefile)."""
    if len(argv) != 1:
        sys.stderr.write("usage: main([FILE])\n")
        return 2
    codes = record_package()
    write(codes, Path(argv[0]))
    counts = ", ".join(f"{len(texts)} texts of {site}" for site, texts in codes.items())
    sys.stdout.write(f"recorded_code: {counts}\n")
    return 0
