"""The jobstream CLI (dev/ops code, outside the layer): `python -m jobstream_cli --help`."""

import sys
from importlib.util import find_spec
from pathlib import Path

# The layer is not installed into the venv: outside `make` (which sets PYTHONPATH) nothing puts it
# on the path, so `python -m jobstream_cli` from a checkout adds it itself.
if find_spec("jobstream") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers" / "jobstream"))
