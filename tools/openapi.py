"""`python -m tools.openapi OUT...`: bundle schemas/openapi.yaml with the JSON Schemas it points to
into one self-contained OpenAPI document, written to each OUT.

A build step (Makefile): `make openapi` rewrites schemas/openapi.json, the one committed copy (a
test says when it is stale); every build (`make setup`, hence `sam build` through `make
deploy-check` and `make rehearse`) writes the copy the API serves at `GET /openapi.json` into the
layer (layers/jobstream/jobstream/http/openapi.json, generated, never committed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

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


def main(outputs: list[str]) -> int:
    if not outputs:
        print("usage: python -m tools.openapi OUT...", file=sys.stderr)
        return 2
    text = render()
    for output in outputs:
        path = Path(output)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
