"""The operator docs keep up with the code: every variable, every route, every invariant."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jobstream_local.template import Template

REPOSITORY = Path(__file__).resolve().parents[2]
DOCS = REPOSITORY / "docs"
SOURCE_DIRS = ("layers", "functions", "jobstream_local", "jobstream_cli", "clients")
VARIABLE = re.compile(r"JOBSTREAM_[A-Z0-9_]+")


def _doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def _variables_in_code() -> set[str]:
    found: set[str] = set()
    for directory in SOURCE_DIRS:
        for path in (REPOSITORY / directory).rglob("*.py"):
            found |= set(VARIABLE.findall(path.read_text(encoding="utf-8")))
    return found


def test_the_code_names_variables() -> None:
    # Guards the scan itself: an empty set would make the next test pass vacuously.
    assert {"JOBSTREAM_TABLE", "JOBSTREAM_PORT", "JOBSTREAM_CATALOG"} <= _variables_in_code()


@pytest.mark.parametrize("variable", sorted(_variables_in_code()))
def test_every_variable_is_documented(variable: str) -> None:
    assert re.search(rf"\b{variable}\b", _doc("configuration.md")), variable


ROUTES = sorted(
    f"{route.method} {route.path}"
    for route in Template.load().http_routes()
    if route.path != "$default"
)


def test_the_template_has_routes() -> None:
    assert "POST /jobs" in ROUTES
    assert len(ROUTES) == 17


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_is_in_the_protocol_doc(route: str) -> None:
    assert f"`{route}`" in _doc("protocol.md"), route


@pytest.mark.parametrize("number", range(1, 11))
def test_every_invariant_is_in_the_architecture_doc(number: int) -> None:
    assert re.search(rf"\bI{number}\b", _doc("architecture.md")), f"I{number}"


def _metrics_in_code() -> set[str]:
    from jobstream.observability import METRICS

    return set(METRICS)


def _metrics_emitted() -> set[str]:
    """Names passed to observability.count / duration_ms anywhere in the layer."""
    call = re.compile(r"observability\.(?:count|duration_ms)\(\s*\"([a-z_]+)\"")
    found: set[str] = set()
    for path in (REPOSITORY / "layers").rglob("*.py"):
        found |= set(call.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_emitted_metric_is_declared() -> None:
    emitted = _metrics_emitted()
    assert {"admitted", "rejected", "sweep_duration_ms"} <= emitted  # guards the scan
    assert emitted == _metrics_in_code()


@pytest.mark.parametrize("metric", sorted(_metrics_in_code()))
def test_every_metric_is_documented(metric: str) -> None:
    assert re.search(rf"^\| `{metric}` \|", _doc("operations.md"), re.MULTILINE), metric


TEST_NAME_IN_DOCS = re.compile(r"::(test_[a-z0-9_]+)")
TEST_FILE_IN_DOCS = re.compile(r"\b(test_[a-z0-9_]+\.py)\b")


def _doc_texts() -> dict[str, str]:
    paths = [*DOCS.glob("*.md"), REPOSITORY / "README.md"]
    return {path.name: path.read_text(encoding="utf-8") for path in paths}


def test_every_test_the_docs_cite_exists() -> None:
    # The docs name the test that proves each claim; a renamed or removed test must not linger.
    sources = [path.read_text(encoding="utf-8") for path in (REPOSITORY / "tests").rglob("*.py")]
    defined = {name for text in sources for name in re.findall(r"def (test_[a-z0-9_]+)", text)}
    files = {path.name for path in (REPOSITORY / "tests").rglob("test_*.py")}
    cited_names = {
        (doc, name)
        for doc, text in _doc_texts().items()
        for name in TEST_NAME_IN_DOCS.findall(text)
    }
    cited_files = {
        (doc, name)
        for doc, text in _doc_texts().items()
        for name in TEST_FILE_IN_DOCS.findall(text)
    }
    assert cited_names, "the docs cite tests"
    assert sorted((doc, name) for doc, name in cited_names if name not in defined) == []
    assert sorted((doc, name) for doc, name in cited_files if name not in files) == []


# ------------------------------------------------------------ README, deploy guide, local files


def _readme() -> str:
    return (REPOSITORY / "README.md").read_text(encoding="utf-8")


def _make_targets() -> list[str]:
    makefile = (REPOSITORY / "Makefile").read_text(encoding="utf-8")
    # Every .PHONY line: a target may be declared next to its rule.
    return " ".join(re.findall(r"^\.PHONY:(.*)$", makefile, flags=re.MULTILINE)).split()


@pytest.mark.parametrize("target", _make_targets())
def test_every_make_target_is_in_the_readme(target: str) -> None:
    assert f"| `{target}` |" in _readme(), target


def _cli_commands() -> list[str]:
    from jobstream_cli.app import app

    commands = [command.name for command in app.registered_commands]
    groups = [group.name for group in app.registered_groups]
    return sorted(str(name) for name in [*commands, *groups] if name)


def test_the_cli_has_commands() -> None:
    assert {"submit", "cancel", "ack", "smoke", "dlq"} <= set(_cli_commands())


@pytest.mark.parametrize("command", _cli_commands())
def test_every_cli_command_is_documented(command: str) -> None:
    texts = "\n".join(_doc_texts().values())
    assert re.search(rf"jobstream[^\n`]* {re.escape(command)}\b|`{command}`", texts), command


@pytest.mark.parametrize("output", sorted(Template.load().document["Outputs"]))
def test_every_stack_output_is_in_the_deploy_guide(output: str) -> None:
    assert f"`{output}`" in _doc("deploy.md"), output


@pytest.mark.parametrize("page", sorted(path.name for path in DOCS.glob("*.md")))
def test_every_page_is_linked_from_the_readme(page: str) -> None:
    assert f"(docs/{page}" in _readme(), page


def test_the_readme_shows_the_shipped_targets() -> None:
    from jobstream.config.settings import DEFAULT_TARGETS_FILE

    (shown,) = re.findall(r"targets file.*?```json\n(.*?)```", _readme(), flags=re.DOTALL)
    assert json.loads(shown) == json.loads(DEFAULT_TARGETS_FILE.read_text(encoding="utf-8"))


def test_every_variable_the_docs_name_is_read_by_the_code() -> None:
    named = {name for text in _doc_texts().values() for name in VARIABLE.findall(text)}
    assert "JOBSTREAM_LOCAL_CONCURRENCY" in named  # guards the scan
    assert sorted(named - _variables_in_code()) == []


def test_sam_env_points_sam_local_at_the_local_stacks_resources() -> None:
    # `sam local` passes only variables the template declares; the names are the local stack's.
    template = Template.load()
    declared = template.document["Globals"]["Function"]["Environment"]["Variables"]
    parameters = json.loads((REPOSITORY / "local" / "sam-env.json").read_text())["Parameters"]
    assert set(parameters) - set(declared) <= {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    for name, value in declared.items():
        resource = value.get("Ref") if isinstance(value, dict) else None
        if resource in template.resources:
            assert parameters[name].endswith(template.physical_name(resource)), name
    assert parameters["JOBSTREAM_AWS_ENDPOINT_URL"].endswith(":4566")


# ------------------------------------------------------------ what the docs point at exists

# Documents a reader of this repository does not have: the design notes, issue threads and
# working notes the code was written from. What they said belongs in the docs themselves.
ELSEWHERE = re.compile(
    r"\bdesign §|\bdesign\.md\b|\bissue \d+|\bthe brief\b|protocol-reference|consumer-telepost"
    r"|\.\./shared\b",
    re.IGNORECASE,
)
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def _pages() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), REPOSITORY / "README.md", *_client_pages()]


def _client_pages() -> list[Path]:
    return sorted((REPOSITORY / "clients" / "python").glob("*.md"))


@pytest.mark.parametrize("page", _pages(), ids=lambda path: path.name)
def test_no_page_points_at_material_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = [
        f"{page.name}:{text[: match.start()].count(chr(10)) + 1}: {match.group(0)}"
        for match in ELSEWHERE.finditer(text)
    ]
    assert found == []


@pytest.mark.parametrize("page", _pages(), ids=lambda path: path.name)
def test_every_relative_link_resolves(page: Path) -> None:
    targets = [
        target
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if "://" not in target and not target.startswith("mailto:")
    ]
    assert [target for target in targets if not (page.parent / target).exists()] == []
