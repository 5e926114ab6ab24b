"""The code of dataclasses' generated methods, recorded by the layer's build
(jobstream/dataclass_code.py): classes made from it are the classes compiled without it."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
import types
from importlib.util import MAGIC_NUMBER
from pathlib import Path

import pytest

from jobstream import dataclass_code

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
def plain_dataclasses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a test installs in `dataclasses` is taken away after it."""
    assert "exec" not in dataclasses.__dict__  # no test's leftover
    monkeypatch.setattr(dataclasses, "exec", exec, raising=False)
    monkeypatch.delattr(dataclasses, "exec")


def _module(name: str, source: str = _MODULE) -> types.ModuleType:
    """`source` imported as module `name` (dataclasses looks its module up in sys.modules)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(source, name, "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[name]
    return module


def _recorded(tmp_path: Path) -> Path:
    with dataclass_code.recording() as codes:
        _module("recorded_while_recording")
    assert "exec" not in dataclasses.__dict__  # the recorder is gone
    path = tmp_path / "dataclass_code.bin"
    dataclass_code.write(codes, path)
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
    recorded = dataclass_code.install(_recorded(tmp_path))
    assert recorded is not None
    assert dataclass_code.installed() is recorded
    cached = _module("made_from_recorded_code")
    assert recorded.hits >= len(_CLASSES)
    assert recorded.misses == 0
    for name in _CLASSES:
        ours, theirs = getattr(cached, name), getattr(plain, name)
        for method in _METHODS:
            mine, reference = ours.__dict__.get(method), theirs.__dict__.get(method)
            assert (mine is None) == (reference is None), (name, method)
            if mine is not None and hasattr(reference, "__code__"):
                # The same bytecode, constants, names and flags (no future flag leaked in).
                assert mine.__code__ == reference.__code__, (name, method)
                assert mine.__code__.co_flags == reference.__code__.co_flags
                assert mine.__qualname__ == reference.__qualname__
                assert mine.__annotations__ == reference.__annotations__
        assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
        assert ours.__doc__ == theirs.__doc__
        assert ours.__match_args__ == theirs.__match_args__
        assert getattr(ours, "__slots__", None) == getattr(theirs, "__slots__", None)
    for mine, reference in zip(_instances(cached), _instances(plain), strict=True):
        assert repr(mine) == repr(reference)
        assert mine == type(mine)(**_init_arguments(mine))
        assert mine != reference  # another module's class
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


def _init_arguments(instance: object) -> dict[str, object]:
    arguments = {
        field.name: getattr(instance, field.name)
        for field in dataclasses.fields(instance)  # type: ignore[arg-type]
        if field.init
    }
    if hasattr(instance, "total"):  # Ranked's InitVar: total is rank * scale
        arguments["scale"] = instance.total // instance.rank  # type: ignore[attr-defined]
    return arguments


def test_a_text_not_recorded_is_compiled_as_before(tmp_path: Path) -> None:
    plain = _module("compiled_plainly", _OTHER_MODULE)
    recorded = dataclass_code.install(_recorded(tmp_path))
    assert recorded is not None
    other = _module("not_recorded", _OTHER_MODULE)
    assert recorded.misses >= 1
    assert recorded.hits == 0
    for method in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__"):
        mine = other.Unrecorded.__dict__[method].__code__
        assert mine == plain.Unrecorded.__dict__[method].__code__, method
        assert mine.co_flags == plain.Unrecorded.__dict__[method].__code__.co_flags
    assert other.Unrecorded(1) == other.Unrecorded(1)
    assert repr(other.Unrecorded(2)) == "Unrecorded(anything=2)"


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
    assert dataclass_code.install(path) is None
    assert "exec" not in dataclasses.__dict__
    assert dataclass_code.installed() is None


def test_without_the_file_nothing_changes(tmp_path: Path) -> None:
    assert dataclass_code.install(tmp_path / "missing.bin") is None
    assert "exec" not in dataclasses.__dict__
    # The sources, the local stack and the tests run without it: the build writes it.
    assert not dataclass_code.FILE.exists()


def test_while_recording_nothing_is_installed(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    with dataclass_code.recording() as codes:
        assert dataclass_code.install(path) is None  # the package imported while recording
        _module("recorded_again")
    assert len(codes) >= len(_CLASSES)
    assert "exec" not in dataclasses.__dict__


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
from jobstream import dataclass_code
recorded = dataclass_code.install(Path(sys.argv[1]))
for app in sorted(Path(sys.argv[2]).glob("*/app.py")):
    spec = importlib.util.spec_from_file_location(f"app_{app.parent.name}", app)
    sys.path.insert(0, str(app.parent))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(json.dumps({"hits": recorded.hits, "misses": recorded.misses}))
"""


def test_the_build_records_every_dataclass_the_functions_make(tmp_path: Path) -> None:
    """What the layer's Makefile runs, then every function imported with its output."""
    path = tmp_path / "dataclass_code.bin"
    output = _run(
        "import sys; from jobstream import dataclass_code; "
        "sys.exit(dataclass_code.main(sys.argv[1:]))",
        str(path),
        cwd=tmp_path,
    )
    assert "texts recorded" in output
    counts = json.loads(
        _run(_EVERY_FUNCTION, str(path), str(REPOSITORY / "functions"), cwd=tmp_path)
    )
    assert counts["misses"] == 0
    assert counts["hits"] > 100  # the package's dataclasses and its dependencies'


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
    assert f'"$(SITE)/jobstream/{dataclass_code.FILE.name}"' in makefile
    assert "dataclass_code.main(" in makefile
    assert "dataclass_code.install()" in (LAYER / "jobstream" / "__init__.py").read_text()
