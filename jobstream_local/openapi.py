"""`python -m jobstream_local.openapi`: bundle schemas/openapi.yaml with the JSON Schemas it
points to into one self-contained document, served by the API at `GET /openapi.json`.

Written to schemas/openapi.json and into the layer (the function serves the layer's copy);
a test keeps both equal to a fresh bundle.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

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


def bundle() -> dict[str, Any]:
    document = yaml.safe_load(SOURCE.read_text(encoding="utf-8"))
    definitions = json.loads(SCHEMA.read_text(encoding="utf-8"))["$defs"]
    document["components"]["schemas"] = {
        name: _rewrite(definition) for name, definition in definitions.items()
    }
    bundled: dict[str, Any] = _rewrite(document)
    return bundled


def render() -> str:
    return json.dumps(bundle(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    text = render()
    for path in OUTPUTS:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPOSITORY)}")


if __name__ == "__main__":
    main()
