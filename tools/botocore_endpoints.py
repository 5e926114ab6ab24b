"""`python -m tools.botocore_endpoints`: rewrite layers/jobstream/jobstream/botocore_endpoints.json,
botocore's endpoint data narrowed to the services the layer makes clients of (the layer's
botocore_data.py says why), from the botocore this environment pins: the release the Lambda
runtime's pair is pinned to (requirements-dev.txt). `make botocore-endpoints` runs it; a test says
when the file differs from what the pinned botocore holds.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.loaders import Loader

from jobstream.botocore_data import ENDPOINTS, NARROWED_ENDPOINTS_FILE, narrowed_endpoints


def builtin_endpoints() -> dict[str, Any]:
    """botocore's own endpoint data: never a file of AWS_DATA_PATH or ~/.aws/models."""
    loader = Loader(
        extra_search_paths=[Loader.BUILTIN_DATA_PATH], include_default_search_paths=False
    )
    data: dict[str, Any] = loader.load_data(ENDPOINTS)
    return data


def rendered() -> str:
    """The file's text for this environment's botocore."""
    return json.dumps(narrowed_endpoints(builtin_endpoints()), separators=(",", ":")) + "\n"


def main() -> None:
    NARROWED_ENDPOINTS_FILE.write_text(rendered(), encoding="utf-8")
    print(f"wrote {NARROWED_ENDPOINTS_FILE.name}")


if __name__ == "__main__":
    main()
