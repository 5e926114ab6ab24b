"""`python -m jobstream_local.openapi` (`make openapi`): render the job types' schemas from the
job-type registry into schemas/jobstream.schema.json (each type's `$defs` and the Task's
params branch per job type), then bundle schemas/openapi.yaml with those JSON Schemas into one
self-contained document, served by the API at `GET /openapi.json`.

Written to schemas/jobstream.schema.json, schemas/openapi.json and into the layer (the function
serves the layer's copy); a test keeps all three equal to a fresh rendering.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from jobstream.jobtypes import registry
from jobstream.jobtypes.base import JobType
from jobstream_local.template import REPOSITORY

SOURCE = REPOSITORY / "schemas" / "openapi.yaml"
SCHEMA = REPOSITORY / "schemas" / "jobstream.schema.json"
OUTPUTS = (
    REPOSITORY / "schemas" / "openapi.json",
    REPOSITORY / "layers" / "jobstream" / "jobstream" / "http" / "openapi.json",
)
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


def main() -> None:
    SCHEMA.write_text(render_schema(), encoding="utf-8")
    print(f"wrote {SCHEMA.relative_to(REPOSITORY)}")
    text = render()
    for path in OUTPUTS:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPOSITORY)}")


if __name__ == "__main__":
    main()
