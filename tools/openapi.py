"""`python -m tools.openapi [--schema] OUT...`: bundle schemas/openapi.yaml with the JSON Schemas it
points to (schemas/jobstream.schema.json, with every registered job type's schemas rendered from
the job-type registry) into one self-contained OpenAPI document, written to each OUT; with
`--schema`, rewrite schemas/jobstream.schema.json from the registry first.

A build step (Makefile): `make openapi` rewrites schemas/jobstream.schema.json and
schemas/openapi.json, the committed copies (a test says when they are stale); every build (`make
setup`, hence `sam build` through `make deploy-check` and `make rehearse`) writes the copy the API
serves at `GET /openapi.json` into the layer (layers/jobstream/jobstream/http/openapi.json,
generated, never committed).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from jobstream.jobtypes import registry
from jobstream.jobtypes.base import JobType

REPOSITORY = Path(__file__).resolve().parent.parent
SOURCE = REPOSITORY / "schemas" / "openapi.yaml"
SCHEMA = REPOSITORY / "schemas" / "jobstream.schema.json"
PUBLISHED = REPOSITORY / "schemas" / "openapi.json"
SERVED = REPOSITORY / "layers" / "jobstream" / "jobstream" / "http" / "openapi.json"
_EXTERNAL = "./jobstream.schema.json#/$defs/"
_INTERNAL = "#/$defs/"
_COMPONENT = "#/components/schemas/"


def _rewrite(node: Any) -> Any:
    """Point every schema reference at the bundled components."""
    if isinstance(node, dict):
        rewritten = {key: _rewrite(value) for key, value in node.items()}
        ref = rewritten.get("$ref")
        if isinstance(ref, str):
            for prefix in (_EXTERNAL, _INTERNAL):
                if ref.startswith(prefix):
                    rewritten["$ref"] = _COMPONENT + ref[len(prefix) :]
        return rewritten
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    return node


def _branches(field: str, schema_of: Callable[[JobType], dict[str, Any]]) -> list[dict[str, Any]]:
    """`if job_type is X then <field> is <schema>`, one per registered job type."""
    return [
        {
            "if": {"properties": {"job_type": {"const": job_type.name}}, "required": ["job_type"]},
            "then": {"properties": {field: schema_of(job_type)}},
        }
        for job_type in registry.job_types()
    ]


def _names_a_job_type(branch: Any) -> bool:
    return isinstance(branch, dict) and "job_type" in branch.get("if", {}).get("properties", {})


def _with_branches(definition: dict[str, Any], branches: list[dict[str, Any]]) -> None:
    """The definition's job-type branches replaced by `branches` (its other rules kept)."""
    kept = [rule for rule in definition.get("allOf", []) if not _names_a_job_type(rule)]
    definition["allOf"] = branches + kept


def schema_document() -> dict[str, Any]:
    """schemas/jobstream.schema.json with every registered job type's definitions in it."""
    document: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    definitions = document["$defs"]
    for job_type in registry.job_types():
        definitions.update(job_type.schemas)
    _with_branches(definitions["Task"], _branches("params", lambda t: {"$ref": t.params_schema}))
    _with_branches(
        definitions["Job"],
        _branches("result", lambda t: {"anyOf": [{"$ref": t.result_schema}, {"type": "null"}]}),
    )
    return document


def render_schema() -> str:
    return json.dumps(schema_document(), indent=2, ensure_ascii=False) + "\n"


def bundle() -> dict[str, Any]:
    document = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    definitions = schema_document()["$defs"]
    document["components"]["schemas"] = {
        name: _rewrite(definition) for name, definition in definitions.items()
    }
    bundled: dict[str, Any] = _rewrite(document)
    return bundled


def render() -> str:
    return json.dumps(bundle(), indent=2, ensure_ascii=False) + "\n"


def main(arguments: list[str]) -> int:
    outputs = [argument for argument in arguments if argument != "--schema"]
    if not outputs:
        print("usage: python -m tools.openapi [--schema] OUT...", file=sys.stderr)
        return 2
    if "--schema" in arguments:
        SCHEMA.write_text(render_schema(), encoding="utf-8")
        print(f"wrote {SCHEMA.relative_to(REPOSITORY)}")
    text = render()
    for output in outputs:
        path = Path(output)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
