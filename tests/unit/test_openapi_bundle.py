"""GET /openapi.json serves a bundle kept equal to its sources and to the template's routes."""

from __future__ import annotations

import json
from pathlib import Path

from jobstream.http.openapi import DOCUMENT
from jobstream_local.template import Template
from tools import openapi


def test_the_committed_copies_equal_a_fresh_rendering() -> None:
    assert openapi.SCHEMA.read_text(encoding="utf-8") == openapi.render_schema(), (
        "schemas/jobstream.schema.json is stale: run `make openapi`"
    )
    assert openapi.PUBLISHED.read_text(encoding="utf-8") == openapi.render(), (
        "schemas/openapi.json is stale: run `make openapi`"
    )


def test_the_served_copy_is_generated_by_the_build_and_never_committed() -> None:
    # `make setup` (every target, `sam build` included) writes it from the same sources.
    assert DOCUMENT == openapi.SERVED
    assert DOCUMENT.read_text(encoding="utf-8") == openapi.render(), "run `make setup`"
    ignored = (openapi.REPOSITORY / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert DOCUMENT.relative_to(openapi.REPOSITORY).as_posix() in ignored


def test_the_bundler_writes_every_output_it_is_given(tmp_path: Path) -> None:
    outputs = [tmp_path / "a.json", tmp_path / "b.json"]
    assert openapi.main([str(path) for path in outputs]) == 0
    assert [path.read_text(encoding="utf-8") for path in outputs] == [openapi.render()] * 2
    assert openapi.main([]) == 2


def test_the_bundle_has_exactly_the_template_routes() -> None:
    document = json.loads(openapi.render())
    documented = {
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method in operations
        if method in {"get", "post", "put", "delete", "patch"}
    }
    routes = {f"{r.method} {r.path}" for r in Template.load().http_routes() if r.path != "$default"}
    assert documented == routes


def test_every_reference_resolves_inside_the_bundle() -> None:
    document = json.loads(openapi.render())

    def refs(node: object) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return found + [ref for value in node.values() for ref in refs(value)]
        if isinstance(node, list):
            return [ref for item in node for ref in refs(item)]
        return []

    assert refs(document)
    for ref in refs(document):
        assert ref.startswith("#/"), f"not bundled: {ref}"
        node: object = document
        for part in ref.removeprefix("#/").split("/"):
            assert isinstance(node, dict)
            assert part in node, ref
            node = node[part]
