"""The code the standard library compiles from texts at import, recorded by the layer's build
(jobstream/recorded_code.py): dataclasses and forward references made from it are those compiled
without it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import marshal
import os
import subprocess
import sys
import threading
import types
import typing
from collections.abc import Iterator
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Any

import pytest

from jobstream import recorded_code

REPOSITORY = Path(__file__).resolve().parents[2]
LAYER = REPOSITORY / "layers" / "jobstream"

# Every kind of field and option the package's dataclasses use, and more.
_MODULE = '''
from __future__ import annotations

from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class Point:
    """A point."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Undocumented:
    name: str
    weight: float = field(default=1.0, repr=False)


@dataclass(order=True)
class Ranked:
    rank: int
    name: str = field(default="", compare=False)
    items: list[int] = field(default_factory=list)
    scale: InitVar[int] = 1
    total: int = field(init=False, default=0)
    kind: ClassVar[str] = "ranked"

    def __post_init__(self, scale: int) -> None:
        self.total = self.rank * scale


@dataclass(frozen=True)
class Options:
    name: str
    _: KW_ONLY
    limit: int = 10
    labels: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(unsafe_hash=True, eq=True)
class Key:
    tenant: str
    number: int
'''
_OTHER_MODULE = """
from dataclasses import dataclass


@dataclass(frozen=True)
class Unrecorded:
    anything: int
"""
_CLASSES = ("Point", "Undocumented", "Ranked", "Options", "Key")
_METHODS = (
    "__init__",
    "__repr__",
    "__eq__",
    "__hash__",
    "__setattr__",
    "__delattr__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__getstate__",
    "__setstate__",
)


@pytest.fixture(autouse=True)
def plain_modules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever a test installs in `dataclasses` and `typing` is taken away after it."""
    assert recorded_code.installation() is None  # no test's leftover
    for module, name, builtin in ((dataclasses, "exec", exec), (typing, "compile", compile)):
        assert name not in module.__dict__
        monkeypatch.setattr(module, name, builtin, raising=False)
        monkeypatch.delattr(module, name)
    yield
    recorded_code.uninstall()


def _plain() -> bool:
    return "exec" not in dataclasses.__dict__ and "compile" not in typing.__dict__


def _module(name: str, source: str = _MODULE) -> types.ModuleType:
    """`source` imported as module `name` (dataclasses looks its module up in sys.modules)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(source, name, "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[name]
    return module


def _installed(path: Path) -> recorded_code.Installation:
    installation = recorded_code.install(path)
    assert installation is not None
    return installation


def _recorded(tmp_path: Path) -> Path:
    with recorded_code.recording() as codes:
        _module("recorded_while_recording")
        typing.ForwardRef(_FORWARD_REFERENCE)
    assert _plain()  # the recorders are gone
    path = tmp_path / "recorded_code.bin"
    recorded_code.write(codes, path)
    return path


def _instances(module: types.ModuleType) -> list[object]:
    return [
        module.Point(1, 2, ("a",)),
        module.Undocumented("n", 2.0),
        module.Ranked(3, "r", [1], 2),
        module.Options("o", limit=3, labels={"k": "v"}),
        module.Key("t", 4),
    ]


def test_classes_made_from_recorded_code_are_the_classes_compiled_without_it(
    tmp_path: Path,
) -> None:
    plain = _module("made_plainly")
    installation = _installed(_recorded(tmp_path))
    assert recorded_code.installed() == installation.stand_ins
    recorded = installation.stand_ins["dataclasses"]
    cached = _module("made_from_recorded_code")
    assert recorded.hits >= len(_CLASSES)
    assert recorded.misses == 0
    for name in _CLASSES:
        ours, theirs = getattr(cached, name), getattr(plain, name)
        for method in _METHODS:
            mine, reference = ours.__dict__.get(method), theirs.__dict__.get(method)
            assert (mine is None) == (reference is None), (name, method)
            if mine is not None and hasattr(reference, "__code__"):
                _assert_same_code(mine.__code__, reference.__code__)
                assert mine.__qualname__ == reference.__qualname__
                assert mine.__annotations__ == reference.__annotations__
        assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
        assert ours.__doc__ == theirs.__doc__
        assert ours.__match_args__ == theirs.__match_args__
        assert getattr(ours, "__slots__", None) == getattr(theirs, "__slots__", None)
    for mine, reference in zip(_instances(cached), _instances(plain), strict=True):
        assert repr(mine) == repr(reference)
        assert mine == type(mine)(**_init_arguments(mine))
        assert (type(mine).__hash__ is None) == (type(reference).__hash__ is None)
    point = cached.Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    assert hash(point) == hash(cached.Point(1))
    assert cached.Ranked(1, "a") < cached.Ranked(2, "b")
    assert cached.Ranked(1, "a") == cached.Ranked(1, "b")  # name is not compared
    assert cached.Ranked(3, scale=4).total == 12
    with pytest.raises(TypeError):
        cached.Options("o", 3)  # limit is keyword-only


def _assert_same_code(mine: types.CodeType, reference: types.CodeType) -> None:
    """The same bytecode, constants and names (code objects compare those), and what they do
    not compare: flags (no future flag leaked in), file name, names and positions (tracebacks)."""
    assert mine == reference
    assert mine.co_flags == reference.co_flags
    assert mine.co_filename == reference.co_filename
    assert mine.co_qualname == reference.co_qualname
    assert list(mine.co_positions()) == list(reference.co_positions())
    assert mine.co_linetable == reference.co_linetable


def _init_arguments(instance: object) -> dict[str, object]:
    arguments = {
        field.name: getattr(instance, field.name)
        for field in dataclasses.fields(instance)  # type: ignore[arg-type]
        if field.init
    }
    if hasattr(instance, "total"):  # Ranked's InitVar: total is rank * scale
        arguments["scale"] = instance.total // instance.rank  # type: ignore[attr-defined]
    return arguments


_TWINS = """
from dataclasses import dataclass


@dataclass(frozen=True)
class First:
    name: str


@dataclass(frozen=True)
class Second:
    name: str
"""


def test_classes_of_one_text_each_get_their_own_code(tmp_path: Path) -> None:
    """As compiling gives them: a code object holds the interpreter's specialisations of its
    bytecode, which classes sharing one would evict from each other on every call."""
    with recorded_code.recording() as codes:
        _module("twins_recorded", _TWINS)
    path = tmp_path / "twins.bin"
    recorded_code.write(codes, path)
    recorded = _installed(path).stand_ins["dataclasses"]
    twins = _module("twins", _TWINS)
    assert recorded.misses == 0
    first, second = twins.First.__init__.__code__, twins.Second.__init__.__code__
    assert first == second  # one text
    assert first is not second


def test_uninstalling_gives_dataclasses_its_builtin_back(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    installation = _installed(path)
    assert recorded_code.install(path) is installation  # once a process
    _module("made_while_installed")
    assert recorded_code.uninstall() is installation
    assert installation.stand_ins["dataclasses"].hits >= len(_CLASSES)
    assert installation.problem() is None
    assert _plain()
    assert recorded_code.uninstall() is None  # once
    with recorded_code.recording():
        assert recorded_code.uninstall() is None  # a recording goes on
        assert not _plain()


def test_uninstalling_gives_back_what_was_there_and_leaves_anothers_replacement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def theirs(*arguments: object) -> None: ...

    path = _recorded(tmp_path)
    monkeypatch.setattr(typing, "compile", theirs, raising=False)  # set before the install
    installation = _installed(path)
    monkeypatch.setattr(dataclasses, "exec", theirs, raising=False)  # set after it
    assert recorded_code.uninstall() is installation
    assert typing.__dict__["compile"] is theirs  # what the install replaced, back
    assert dataclasses.__dict__["exec"] is theirs  # another's replacement, left alone


def test_uninstalling_from_threads_at_once_is_done_once(tmp_path: Path) -> None:
    installation = _installed(_recorded(tmp_path))
    barrier = threading.Barrier(8)
    results: list[object] = []

    def first_invocation() -> None:
        barrier.wait()
        results.append(recorded_code.uninstall())

    threads = [threading.Thread(target=first_invocation) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(id, results)) == sorted([id(installation)] + [id(None)] * 7)
    assert _plain()


_PLAIN_EXEC = """
def run(text, namespace):
    exec(text, namespace)
"""


def test_recorded_code_is_what_exec_compiles_from_dataclasses_module() -> None:
    """`exec` called in a module without future flags, as dataclasses' is, at this process's
    optimisation level: a docstring and an assert are kept or dropped alike."""
    plain = types.ModuleType("plain_exec")
    exec(compile(_PLAIN_EXEC, "plain_exec", "exec", dont_inherit=True), plain.__dict__)  # noqa: S102
    text = 'def f(x: "int") -> None:\n    """doc"""\n    assert x\n    return x\n'
    theirs: dict[str, Any] = {}
    plain.run(text, theirs)
    ours: dict[str, Any] = {}
    exec(recorded_code.compiled(text, "exec"), ours)  # noqa: S102
    _assert_same_code(ours["f"].__code__, theirs["f"].__code__)
    assert ours["f"].__doc__ == theirs["f"].__doc__


def test_a_text_not_recorded_is_compiled_as_before(tmp_path: Path) -> None:
    plain = _module("compiled_plainly", _OTHER_MODULE)
    recorded = _installed(_recorded(tmp_path)).stand_ins["dataclasses"]
    other = _module("not_recorded", _OTHER_MODULE)
    assert recorded.misses >= 1
    assert recorded.hits == 0
    for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__"):
        reference = plain.Unrecorded.__dict__[method].__code__
        _assert_same_code(other.Unrecorded.__dict__[method].__code__, reference)
    assert other.Unrecorded(1) == other.Unrecorded(1)
    assert repr(other.Unrecorded(2)) == "Unrecorded(anything=2)"


_FORWARD_REFERENCE = "Mapping[str, list[int | None]]"


def test_forward_references_made_from_recorded_code_are_those_compiled_without_it(
    tmp_path: Path,
) -> None:
    plain = typing.ForwardRef(_FORWARD_REFERENCE)
    recorded = _installed(_recorded(tmp_path)).stand_ins["typing"]
    ours, again = typing.ForwardRef(_FORWARD_REFERENCE), typing.ForwardRef(_FORWARD_REFERENCE)
    assert (recorded.hits, recorded.misses) == (2, 0)
    _assert_same_code(ours.__forward_code__, plain.__forward_code__)
    assert ours.__forward_code__ is not again.__forward_code__  # each its own copy
    assert ours == plain
    namespace = {"Mapping": typing.Mapping}
    assert typing.get_type_hints(_annotated(ours), namespace) == typing.get_type_hints(
        _annotated(plain), namespace
    )
    other = typing.ForwardRef("tuple[str, ...]")  # not recorded: compiled as before
    assert recorded.misses == 1
    reference = compile("tuple[str, ...]", "<string>", "eval", dont_inherit=True)
    _assert_same_code(other.__forward_code__, reference)
    with pytest.raises(SyntaxError, match="Forward reference must be an expression"):
        typing.ForwardRef("not an expression")


def _annotated(reference: typing.ForwardRef) -> object:
    def function(value: int) -> None: ...

    function.__annotations__ = {"value": reference}
    return function


def test_typing_compiles_anything_else_as_before(tmp_path: Path) -> None:
    """Only a forward reference's call takes recorded code; any other is the builtin's, with
    no future flag of the stand-in's module (typing has none)."""
    recorded = _installed(_recorded(tmp_path)).stand_ins["typing"]
    stand_in = typing.compile  # type: ignore[attr-defined]
    for arguments, options in (
        (("x: int = 1", "module.py", "exec"), {}),
        ((_FORWARD_REFERENCE, "<string>", "exec"), {}),
        ((_FORWARD_REFERENCE, "<string>", "eval", 0, False, 2), {}),
        ((_FORWARD_REFERENCE.encode(), "<string>", "eval"), {}),
        ((_FORWARD_REFERENCE, "<string>", "eval"), {"_feature_version": 8}),
    ):
        _assert_same_code(stand_in(*arguments, **options), _builtin_compile(*arguments, **options))
    for flags in (ast.PyCF_ONLY_AST, ast.PyCF_TYPE_COMMENTS | ast.PyCF_ONLY_AST):
        tree = stand_in(_FORWARD_REFERENCE, "<string>", "eval", flags)
        assert isinstance(tree, ast.Expression)
        assert ast.dump(tree) == ast.dump(ast.parse(_FORWARD_REFERENCE, mode="eval"))
    assert recorded.hits == 0


def _builtin_compile(  # noqa: PLR0917 - the builtin's signature
    source: str | bytes,
    filename: str,
    mode: str,
    flags: int = 0,
    dont_inherit: bool = False,
    optimize: int = -1,
    **options: Any,
) -> types.CodeType:
    """The builtin as `typing` calls it: from a module without future imports."""
    code: types.CodeType = compile(source, filename, mode, flags, True, optimize, **options)
    return code


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"\x00\x00\r\n" + bytes([sys.flags.optimize]), id="another-interpreter"),
        pytest.param(MAGIC_NUMBER + bytes([sys.flags.optimize + 1]), id="another-level"),
        pytest.param(b"", id="empty"),
    ],
)
def test_code_recorded_for_another_interpreter_or_level_is_not_installed(
    tmp_path: Path, header: bytes
) -> None:
    path = _recorded(tmp_path)
    body = path.read_bytes()[len(MAGIC_NUMBER) + 1 :]
    path.write_bytes(header + body)
    installation = _installed(path)  # nothing installed, but said at the first invocation
    assert installation.stand_ins == {}
    assert installation.problem() == (
        "the layer's recorded code was not used: "
        "it was recorded for another Python or optimisation level"
    )
    assert _plain()
    assert recorded_code.installed() == {}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\xff\x00", id="truncated"),
        pytest.param(marshal.dumps(["not", "a", "mapping"]), id="not-a-mapping"),
        pytest.param(marshal.dumps({"typing": {"int": "not code"}}), id="not-code"),
    ],
)
def test_a_damaged_file_is_not_used_and_said(tmp_path: Path, body: bytes) -> None:
    """It only saves time: a function imports without it."""
    path = tmp_path / "recorded_code.bin"
    path.write_bytes(MAGIC_NUMBER + bytes([sys.flags.optimize]) + body)
    installation = _installed(path)
    assert installation.stand_ins == {}
    assert installation.problem() == "the layer's recorded code was not used: its file is damaged"
    assert _plain()


_WARNS = 'Literal["\\d"]'  # an invalid escape: compiling it warns


def test_a_text_that_warns_is_not_recorded(tmp_path: Path) -> None:
    """So that it warns, as compiling it does, every time (and raises under -W error)."""
    with recorded_code.recording() as codes:
        typing.ForwardRef(_WARNS)
        typing.ForwardRef(_FORWARD_REFERENCE)
    assert _FORWARD_REFERENCE in codes["typing"]
    assert _WARNS not in codes["typing"]
    path = tmp_path / "recorded_code.bin"
    recorded_code.write(codes, path)
    _installed(path)
    with pytest.warns((SyntaxWarning, DeprecationWarning)):
        typing.ForwardRef(_WARNS)


def test_without_the_file_nothing_changes(tmp_path: Path) -> None:
    assert recorded_code.install(tmp_path / "missing.bin") is None
    assert _plain()
    # The sources, the local stack and the tests run without it: the build writes it.
    assert not recorded_code.FILE.exists()


def test_while_recording_nothing_is_installed(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    with recorded_code.recording() as codes:
        assert recorded_code.install(path) is None  # the package imported while recording
        _module("recorded_again")
    assert len(codes["dataclasses"]) >= len(_CLASSES)
    assert _plain()


def _run(code: str, *arguments: str, cwd: Path) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    environment["PYTHONPATH"] = str(LAYER)
    environment["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(  # noqa: S603 - this interpreter, our own code
        [sys.executable, "-c", code, *arguments],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=cwd,  # nothing of the repository on the path but the layer
    ).stdout


_EVERY_FUNCTION = """
import importlib.util, json, sys
from pathlib import Path
from jobstream import recorded_code
installed = recorded_code.install(Path(sys.argv[1])).stand_ins
for app in sorted(Path(sys.argv[2]).glob("*/app.py")):
    spec = importlib.util.spec_from_file_location(f"app_{app.parent.name}", app)
    sys.path.insert(0, str(app.parent))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(json.dumps({site: [each.hits, each.misses] for site, each in installed.items()}))
"""


def test_the_build_records_every_text_the_functions_compile(tmp_path: Path) -> None:
    """What the layer's Makefile runs, then every function imported with its output."""
    path = tmp_path / "recorded_code.bin"
    output = _run(
        "import sys; from jobstream import recorded_code; "
        "sys.exit(recorded_code.main(sys.argv[1:]))",
        str(path),
        cwd=tmp_path,
    )
    assert "texts of dataclasses" in output
    functions = str(REPOSITORY / "functions")
    counts = json.loads(_run(_EVERY_FUNCTION, str(path), functions, cwd=tmp_path))
    assert set(counts) == {"dataclasses", "typing"}
    for hits, misses in counts.values():
        assert misses == 0
        assert hits > 100  # the package's and its dependencies' (pydantic-core's TypedDicts)


def _botocore_pin(path: Path) -> str:
    pins = [line for line in path.read_text().splitlines() if line.startswith("botocore==")]
    assert len(pins) == 1, path
    return pins[0]


def test_the_build_imports_the_botocore_the_runtime_brings() -> None:
    build = _botocore_pin(LAYER / "requirements-build.txt")
    assert build == _botocore_pin(REPOSITORY / "requirements-dev.txt")
    assert build == _botocore_pin(REPOSITORY / "rehearsal" / "requirements-lambda-runtime.txt")


def test_the_build_writes_the_file_the_package_installs() -> None:
    makefile = (LAYER / "Makefile").read_text()
    assert f'"$$site/jobstream/{recorded_code.FILE.name}"' in makefile
    assert "recorded_code.main(" in makefile
    assert "recorded_code.install()" in (LAYER / "jobstream" / "__init__.py").read_text()
