"""GET /openapi.json serves a bundle kept equal to its sources and to the template's routes."""

from __future__ import annotations

import json

from jobstream.http.openapi import DOCUMENT
from jobstream_local import openapi
from jobstream_local.template import Template


def test_both_copies_equal_a_fresh_bundle() -> None:
    fresh = openapi.render()
    for path in openapi.OUTPUTS:
        assert path.read_text(encoding="utf-8") == fresh, (
            f"{path.name} is stale: run `make openapi`"
        )
    assert DOCUMENT in openapi.OUTPUTS


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
